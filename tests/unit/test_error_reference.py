"""The error reference (docs/errors.md) against the conditions the code defines."""

from __future__ import annotations

from eos_kafka_source import error_reference as ref
from eos_kafka_source import errors


def test_every_condition_has_an_entry_and_every_entry_a_condition() -> None:
    defined = ref.defined_conditions()
    assert defined - set(ref.BY_CONDITION) == set(), "conditions without an entry in " \
        "eos_kafka_source/error_reference.py"
    assert set(ref.BY_CONDITION) - defined == set(), "entries naming no condition"
    assert len(ref.BY_CONDITION) == len(ref.ENTRIES), "a condition with two entries"


def test_the_page_is_generated_from_the_entries() -> None:
    assert ref.PAGE.read_text() == ref.render(), (
        "docs/errors.md is stale: python -m eos_kafka_source.error_reference --write")


def test_every_cli_json_document_is_on_the_page() -> None:
    for command in ref.JSON_COMMANDS:
        fields = ref.json_fields(command)
        assert any("version" in line for line in fields), command


def test_kafka_code_classes_never_replace_ours() -> None:
    """Kafka's code 32 class once replaced ours of the same name: the sink's refused
    timestamps reached users as EOSKAFKA_KAFKA_ERROR instead of EOSKAFKA_INVALID_TIMESTAMP."""
    assert errors.InvalidTimestampError.condition == "EOSKAFKA_INVALID_TIMESTAMP"
    assert issubclass(errors.InvalidTimestampError, errors.SchemaError)
    assert errors.for_code(32).name == "INVALID_TIMESTAMP"
    assert not issubclass(errors.for_code(32), errors.SchemaError)
