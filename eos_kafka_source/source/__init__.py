"""The Spark-facing source: driver-side planning, input partitions, executor-side reading.

Modules, by where they run:

* :mod:`.planner` - driver (the Python worker that plans batches); no Spark imports.
* :mod:`.partitions` - the picklable input partition handed from driver to executor.
* :mod:`.partition_reader` - executor; streams one offset range as Arrow batches.
* :mod:`.stream_reader`, :mod:`.batch_reader` - the thin Spark reader classes.
"""
