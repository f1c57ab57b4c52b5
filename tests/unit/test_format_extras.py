"""A format whose packages are not installed fails naming its extra and the pip command,
where the codec is first needed: on the driver (the schema at the query's start) and in
each task (decoding and encoding). The missing package is simulated (``sys.modules``)."""

from __future__ import annotations

import sys

import pytest

from eos_kafka_source.errors import ConfigError
from eos_kafka_source.formats import plans
from eos_kafka_source.formats.extras import NEEDS
from eos_kafka_source.formats.schemas import FAILFAST, RegisteredSchema
from tests.unit.avro_helpers import Lookup

CASES = [(module, package) for module, (_, _, packages) in NEEDS.items()
         for package in packages]


def _hide(monkeypatch: pytest.MonkeyPatch, package: str) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # import raises ModuleNotFoundError


@pytest.mark.parametrize(("module", "package"), CASES)
def test_a_missing_package_names_the_extra_and_the_pip_command(
        monkeypatch: pytest.MonkeyPatch, module: str, package: str) -> None:
    fmt, extra, _ = NEEDS[module]
    _hide(monkeypatch, package)
    with pytest.raises(ConfigError) as info:
        plans.codec(module)
    text = str(info.value)
    assert f"valueFormat/keyFormat {fmt} needs" in text
    assert package.replace("google.", "") in text
    assert f"[{extra}] extra" in text and f"py3-none-any.whl[{extra}]'" in text
    assert "the driver and of every executor" in text


def test_an_executors_decoder_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """The task's side of a read: the plan arrives pickled, the codec is imported there."""
    side = plans.SideRead("value", "avro", RegisteredSchema(1, "AVRO", '"string"'),
                          __import__("pyarrow").string())
    _hide(monkeypatch, "numpy")
    with pytest.raises(ConfigError, match=r"needs the Python package\(s\) numpy"):
        side.decoder(Lookup(), FAILFAST)


def test_every_format_extra_declares_what_its_codec_imports() -> None:
    """pyproject's extras against NEEDS: numpy in every format's extra, and [schemas] the
    union of them."""
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]

    def names(extra: str) -> set[str]:
        return {req.split(">")[0].split("=")[0].split("[")[0].strip() for req in extras[extra]}

    pip_name = {"google.protobuf": "protobuf", "referencing": "jsonschema"}  # jsonschema's
    for _, extra, packages in NEEDS.values():
        assert {pip_name.get(p, p) for p in packages} <= names(extra), extra
        assert names(extra) <= names("schemas"), extra
