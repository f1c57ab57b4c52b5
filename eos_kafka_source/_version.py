"""The package's version, in one place: ``pyproject.toml`` reads it, ``eoskafka --version``,
the schema registry client's User-Agent and the decision log's writer name print it, and
``eos_kafka_source.__version__`` hands it on. Imports nothing: any layer may name it."""

__version__ = "0.2.0"
