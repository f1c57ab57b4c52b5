"""eoskafka benchmarks, one package per question, each run as ``python -m benchmarks.<name>``.

- :mod:`.throughput`: how fast (``make bench``, ``make bench-connector``);
- :mod:`.latency`: produce to visible, and the floor of Spark's Python data source beside it
  (``make bench-latency``);
- :mod:`.availability`: what faults do (``make availability``, ``make contrast``);
- :mod:`.scale`: the driver's commit as tasks and partitions grow (``make bench-scale``);
- :mod:`.longrun`: a long life of small batches (``make bench-longrun``).

Shared code is in :mod:`.common`. Results go to ``bench-results/``.
"""
