"""``valueFormat``/``keyFormat`` and the schema options, parsed once at the edge.

The source's and the sink's option parsers call :meth:`ReadFormats.parse` and
:meth:`WriteFormats.parse` with the lower-cased option map; the frozen results ride in
``SourceOptions.formats`` / ``SinkOptions.formats`` (None when both sides are ``raw``), so
nothing deeper re-reads a string. Nothing here talks to the registry: the reader and
writer schemas are resolved from these by :mod:`.resolve`, on the driver.

Rules, beyond what each option says:

* A non-raw format needs ``schema.registry.url`` (writer schemas are found by the id in
  each payload, even when the reader schema is given as text).
* An option that would do nothing is refused: a ``schema.registry.*`` option, ``mode``,
  ``includeSchemaId`` or a subject/schema option when that side (or both) is ``raw``.
* A read subscribed to one topic reads its schema from ``<topic>-value`` (``-key``);
  with several topics or a pattern the subject, id or text must be given.
* The sink's ``use.latest.version`` applies only with ``auto.register.schemas=false``,
  as in Confluent's serializers; both true is refused rather than one ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..errors import ConfigError
from .registry_config import RegistryConfig
from .schemas import AVRO, FAILFAST, JSON, PERMISSIVE, PROTOBUF

RAW = "raw"
#: Format name -> (codec module under eos_kafka_source.formats, Confluent schemaType).
FORMATS: dict[str, tuple[str, str]] = {
    "avro": ("avro", AVRO), "protobuf": ("protobuf", PROTOBUF), "json": ("json_schema", JSON),
}
SIDES = ("value", "key")
URL = "schema.registry.url"
REGISTRY_PREFIX = "schema.registry."

#: Subject name strategies: short name -> Confluent's class name.
STRATEGIES = {
    "TopicNameStrategy": "io.confluent.kafka.serializers.subject.TopicNameStrategy",
    "RecordNameStrategy": "io.confluent.kafka.serializers.subject.RecordNameStrategy",
    "TopicRecordNameStrategy": "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
}
#: spark-avro's defaults for a derived schema's top-level record (``to_avro``'s).
RECORD_NAME, RECORD_NAMESPACE = "topLevelRecord", ""

#: Options of one side: ``value<Name>`` and ``key<Name>``.
_SIDE_READ = ("Format", "Subject", "SchemaVersion", "SchemaId", "Schema", "MessageName")
_SIDE_WRITE = ("Format", "Subject")
#: Option names, as users write them (the parsers' allowed lists add these).
SOURCE_FORMAT_OPTIONS = (*(s + n for s in SIDES for n in _SIDE_READ), "mode",
                         "includeSchemaId", "includeDeadLetter")
SINK_FORMAT_OPTIONS = (*(s + n for s in SIDES for n in _SIDE_WRITE),
                       *(f"{s}.subject.name.strategy" for s in SIDES),
                       "auto.register.schemas", "use.latest.version",
                       "recordName", "recordNamespace")


def _get(opts: Mapping[str, str], name: str) -> str | None:
    return opts.get(name.lower())


def _format(opts: Mapping[str, str], side: str) -> str:
    name = f"{side}Format"
    raw = _get(opts, name)
    if raw is None:
        return RAW
    value = raw.strip().lower()
    if value != RAW and value not in FORMATS:
        raise ConfigError(f"{name} must be one of raw, avro, protobuf, json; got {raw!r}.")
    return value


def _positive(opts: Mapping[str, str], name: str) -> int | None:
    raw = _get(opts, name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {raw!r}.")
    return value


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(opts, name)
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise ConfigError(f"{name} must be true or false, got {raw!r}.")
    return raw.strip().lower() == "true"


def _registry(opts: Mapping[str, str], used: bool, what: str) -> RegistryConfig | None:
    """The parsed ``schema.registry.*`` options, or None when no format uses them."""
    given = sorted(k for k in opts if k.startswith(REGISTRY_PREFIX))
    if not used:
        if given:
            raise ConfigError(f"{given[0]} only applies with valueFormat or keyFormat avro, "
                              f"protobuf or json (both are raw here); set a format or "
                              f"remove it.")
        return None
    if not (_get(opts, URL) or "").strip():
        raise ConfigError(f"{what} needs option('{URL}', 'http://host:8081'): the schemas "
                          f"live in a registry speaking Confluent's REST API (Confluent "
                          f"Schema Registry, Apicurio's ccompat API, Redpanda, Karapace).")
    return RegistryConfig.parse({k: v for k, v in opts.items() if k.startswith(REGISTRY_PREFIX)})


def _named(formats: Mapping[str, str]) -> str:
    return " and ".join(f"{s}Format={f}" for s, f in formats.items() if f != RAW)


def _refuse_unused(opts: Mapping[str, str], names: tuple[str, ...], why: str) -> None:
    for name in names:
        if _get(opts, name) is not None:
            raise ConfigError(f"{name} only applies {why}; remove it or set the format.")


def _formats(opts: Mapping[str, str], side_options: Callable[[str], tuple[str, ...]],
             shared: tuple[str, ...]) -> dict[str, str] | None:
    """Each side's format; None when both are raw. A raw side's ``side_options(side)``
    are refused, and with both raw the ``shared`` and registry options too."""
    formats = {side: _format(opts, side) for side in SIDES}
    for side, fmt in formats.items():
        if fmt == RAW:
            _refuse_unused(opts, side_options(side), f"with {side}Format avro, protobuf or json")
    if all(f == RAW for f in formats.values()):
        _refuse_unused(opts, shared, "with valueFormat or keyFormat avro, protobuf or json")
        _registry(opts, False, "")
        return None
    return formats


@dataclass(frozen=True)
class ReadSide:
    """How one side's (``value`` or ``key``) reader schema is chosen: by ``schema_id``,
    by ``text``, or the subject's ``version`` (None: latest)."""

    side: str
    format: str
    subject: str | None = None
    version: int | None = None
    schema_id: int | None = None
    text: str | None = None
    #: Protobuf: the reader message (full or short name); None: the schema's first.
    message: str | None = None

    @property
    def module(self) -> str:
        return FORMATS[self.format][0]

    @property
    def schema_type(self) -> str:
        return FORMATS[self.format][1]

    @classmethod
    def parse(cls, opts: Mapping[str, str], side: str, fmt: str,
              topics: tuple[str, ...]) -> ReadSide:
        names = {n: f"{side}{n}" for n in _SIDE_READ}
        message = (_get(opts, names["MessageName"]) or "").strip() or None
        if _get(opts, names["MessageName"]) is not None and fmt != "protobuf":
            raise ConfigError(f"{names['MessageName']} only applies with {side}Format="
                              f"protobuf (this read's is {fmt}); remove it.")
        subject = (_get(opts, names["Subject"]) or "").strip() or None
        version_raw = _get(opts, names["SchemaVersion"])
        version = None
        if version_raw is not None and version_raw.strip().lower() != "latest":
            version = _positive(opts, names["SchemaVersion"])
        schema_id = _positive(opts, names["SchemaId"])
        text = _get(opts, names["Schema"])
        if text is not None and not text.strip():
            raise ConfigError(f"{names['Schema']} is empty; give the reader schema's text.")
        chosen = [n for n, v in ((names["SchemaVersion"], version_raw),
                                 (names["SchemaId"], schema_id), (names["Schema"], text))
                  if v is not None]
        if len(chosen) > 1:
            raise ConfigError(f"{' and '.join(chosen)} both choose the {side} reader schema; "
                              f"keep one.")
        if subject is not None and (schema_id is not None or text is not None):
            raise ConfigError(f"{names['Subject']} names where a version is looked up; with "
                              f"{chosen[0]} it would do nothing. Remove one.")
        if subject is None and schema_id is None and text is None and len(topics) != 1:
            what = "several topics" if topics else "a topic pattern"
            raise ConfigError(
                f"{names['Format']}={fmt} on a read of {what} cannot take the reader schema "
                f"from one '<topic>-{side}' subject; set {names['Subject']}, "
                f"{names['SchemaId']} or {names['Schema']}.")
        if subject is None and schema_id is None and text is None:
            subject = f"{topics[0]}-{side}"
        return cls(side, fmt, subject, version, schema_id, text, message)


@dataclass(frozen=True)
class ReadFormats:
    """A read's payload formats: ``value``/``key`` are None where the side is raw."""

    value: ReadSide | None
    key: ReadSide | None
    registry: RegistryConfig
    mode: str = FAILFAST
    include_schema_id: bool = False
    #: ``includeDeadLetter``: the ``deadLetter`` column (formats/dead_letter.py).
    include_dead_letter: bool = False

    @property
    def sides(self) -> tuple[ReadSide, ...]:
        return tuple(s for s in (self.value, self.key) if s is not None)

    @classmethod
    def parse(cls, opts: Mapping[str, str], topics: tuple[str, ...]) -> ReadFormats | None:
        """From the lower-cased option map of a read subscribed to ``topics`` (empty for
        a pattern); None when both sides are raw (every format option then refused)."""
        formats = _formats(opts, lambda side: tuple(side + n for n in _SIDE_READ[1:]),
                           ("mode", "includeSchemaId", "includeDeadLetter"))
        if formats is None:
            return None
        mode_raw = _get(opts, "mode")
        mode = FAILFAST if mode_raw is None else mode_raw.strip().upper()
        if mode not in (FAILFAST, PERMISSIVE):
            raise ConfigError(f"mode must be FAILFAST or PERMISSIVE (Spark's from_avro "
                              f"names), got {mode_raw!r}.")
        value, key = (ReadSide.parse(opts, s, formats[s], topics) if formats[s] != RAW
                      else None for s in SIDES)
        include = _bool(opts, "includeSchemaId", False)
        dead_letter = _bool(opts, "includeDeadLetter", False)
        if dead_letter and mode != PERMISSIVE:
            raise ConfigError("includeDeadLetter=true needs mode=PERMISSIVE: under FAILFAST "
                              "a payload that does not decode fails the query, so no row "
                              "would be a dead letter. Set option('mode', 'PERMISSIVE').")
        registry = _registry(opts, True, _named(formats))
        assert registry is not None
        return cls(value, key, registry, mode, include, dead_letter)


@dataclass(frozen=True)
class WriteSide:
    """How one side's writer schema is found: the subject (``subject`` given, else from
    ``strategy``), and the derived schema's top-level name."""

    side: str
    format: str
    strategy: str = "TopicNameStrategy"
    subject: str | None = None

    @property
    def module(self) -> str:
        return FORMATS[self.format][0]

    @property
    def schema_type(self) -> str:
        return FORMATS[self.format][1]

    def subject_for(self, topic: str | None, record: str) -> str | None:
        """The subject for ``topic`` and the schema's full record name; None when it needs
        a topic and there is none (a ``topic`` column)."""
        if self.subject is not None:
            return self.subject
        if self.strategy == "RecordNameStrategy":
            return record
        if topic is None:
            return None
        if self.strategy == "TopicRecordNameStrategy":
            return f"{topic}-{record}"
        return f"{topic}-{self.side}"


def _strategy(opts: Mapping[str, str], side: str) -> str:
    name = f"{side}.subject.name.strategy"
    raw = _get(opts, name)
    if raw is None:
        return "TopicNameStrategy"
    value = raw.strip()
    for short, full in STRATEGIES.items():
        if value in (short, full):
            return short
    raise ConfigError(f"{name} must be TopicNameStrategy, RecordNameStrategy or "
                      f"TopicRecordNameStrategy (or Confluent's class name, e.g. "
                      f"{STRATEGIES['TopicNameStrategy']}); got {raw!r}.")


@dataclass(frozen=True)
class WriteFormats:
    """A write's payload formats: ``value``/``key`` are None where the side is raw."""

    value: WriteSide | None
    key: WriteSide | None
    registry: RegistryConfig
    auto_register: bool = True
    use_latest: bool = False
    record_name: str = RECORD_NAME
    record_namespace: str = RECORD_NAMESPACE

    @property
    def sides(self) -> tuple[WriteSide, ...]:
        return tuple(s for s in (self.value, self.key) if s is not None)

    @classmethod
    def parse(cls, opts: Mapping[str, str]) -> WriteFormats | None:
        formats = _formats(opts, lambda side: (f"{side}Subject",
                                               f"{side}.subject.name.strategy"),
                           ("auto.register.schemas", "use.latest.version", "recordName",
                            "recordNamespace"))
        if formats is None:
            return None
        auto = _bool(opts, "auto.register.schemas", True)
        latest = _bool(opts, "use.latest.version", False)
        if auto and latest:
            raise ConfigError("use.latest.version=true applies only with "
                              "auto.register.schemas=false (as in Confluent's serializers); "
                              "set option('auto.register.schemas', 'false') too.")
        name = (_get(opts, "recordName") or RECORD_NAME).strip()
        if not name:
            raise ConfigError("recordName is empty; give the derived schema's record name.")
        value, key = (WriteSide(s, formats[s], _strategy(opts, s),
                                (_get(opts, f"{s}Subject") or "").strip() or None)
                      if formats[s] != RAW else None for s in SIDES)
        namespace = (_get(opts, "recordNamespace") or RECORD_NAMESPACE).strip()
        registry = _registry(opts, True, _named(formats))
        assert registry is not None
        return cls(value, key, registry, auto, latest, name, namespace)
