"""The exactly-once sink: task writer, hand-off, committer, naming, fencing, decision log."""
