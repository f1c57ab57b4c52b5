"""eoskafka benchmarks: per-task source and sink costs against reference clients, and Spark runs.

Run with ``make bench`` (``python -m benchmarks.run``); ``--quick`` for a smoke run.
Results go to ``bench-results/latest.md`` and ``bench-results/latest.json``.
"""
