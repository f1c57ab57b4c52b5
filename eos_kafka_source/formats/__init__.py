"""Schema'd payloads: Avro, Protobuf and JSON Schema in Confluent's wire format.

A value (or key) in Confluent's wire format is a zero byte, a 4-byte big-endian schema id,
(Protobuf only) the message indexes, then the encoded record. The schemas live in a
registry that speaks Confluent's REST API. eoskafka decodes and encodes whole Arrow
columns inside its own reader and writer, so a PySpark job needs no JVM jar.

Modules, one job each:

- :mod:`.schemas`   -- the shared vocabulary: a registered schema, the lookup interface the
  codecs use, a decoded column.
- :mod:`.framing`   -- the 5-byte header (and Protobuf's message indexes): split and build;
  :mod:`.header_ids` -- a schema id carried in a record header instead, as that prefix.
- :mod:`.extras`    -- the packages each format needs, and the extra that brings them.
- :mod:`.registry`  -- the HTTP client for Confluent's REST API (ccompat), with sign-ins, TLS
  and a per-process cache.
- :mod:`.avro`, :mod:`.protobuf`, :mod:`.json_schema` -- one codec per format: the reader
  schema as an Arrow/Spark type, decode a binary column, encode a struct column.
- :mod:`.options`   -- ``valueFormat``/``keyFormat`` and the schema options, parsed once
  into frozen objects (the ``schema.registry.*`` ones by :mod:`.registry_config`).
- :mod:`.resolve`   -- driver: the reader and writer schemas looked up (or registered) once
  when a query starts, and the Spark columns they give, checked there.
- :mod:`.plans`     -- what the driver hands the tasks: the schemas by id and text.
- :mod:`.payload`   -- executor: decode a read's and encode a write's Arrow batches.
"""
