"""The payload explorer: generated schemas and values, the reference decoders as the oracle.

Seeded generators (avro_gen, proto_gen, json_gen) draw schemas and values; each format's
check (avro_check against spark-avro's from_avro, fastavro and Confluent's deserializer;
proto_check against protobuf's own runtime; json_check against jsonschema) reads the
reference's bytes with eoskafka's decoder and writes eoskafka's rows back for the reference
to read; run.py batches, shrinks and judges the known-difference lists (known.py,
known_differences/). ``make explore-formats`` runs it long, CI a few seeds of the date
(tests/formats/test_formats_explorer.py).
"""
