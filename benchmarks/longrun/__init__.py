"""What a long life does: one exactly-once query over thousands of micro-batches
(``make bench-longrun``), and the same hooks in a loop without Spark."""
