"""How fast: per-task source and sink costs against reference clients, Spark runs, and the
side-by-side with Spark's own Kafka connector (``make bench``, ``make bench-connector``)."""
