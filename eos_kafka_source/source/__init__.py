"""The source: driver-side planning, input partitions, executor-side reading.

Modules, top to bottom (``.importlinter`` holds the order):

* :mod:`.stream_reader`, :mod:`.batch_reader` - Spark's reader classes, kept thin.
* :mod:`.partition_reader` - executor; the one module that reads an input partition, as
  Arrow batches. :mod:`.packing` - driver; ranges into input partitions, by task slots.
  :mod:`.available_now` - Trigger.AvailableNow on pyspark < 4.2.
* :mod:`.planner` - driver (the Python worker that plans batches); no Spark imports.
  :mod:`.partitions` - the picklable input partitions handed from driver to executor.
  :mod:`.slots`, :mod:`.schema`, :mod:`.lag`.
"""
