"""How long from produce to visible, and the per-batch floor of Spark's Python data source
beside it (``make bench-latency``)."""
