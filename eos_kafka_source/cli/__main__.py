"""``python -m eos_kafka_source.cli``: the same as the ``eoskafka`` command."""

from . import main

raise SystemExit(main())
