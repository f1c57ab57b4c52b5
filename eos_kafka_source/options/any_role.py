"""Options checked at Spark's first question, before it is known what they are for.

Spark asks a Python data source for its schema first on every path (``load()`` of a
read, ``save()`` and ``start()`` of a write), and its readers and writers only later: a
streaming write's at its first batch. Checked only then, a bad option was not the first
error a user read (``option("valueFormat", "avro").load().select("value.id")`` failed
on Spark's analysis of ``value.id``). But the schema call does not say whether the
options are a read's or a write's, or which kind of read, so :func:`check_any_role`
refuses what would be refused in every role the options can have: a read always names a
subscription and a write never does; a write's own keys mark it as one. The readers and
writers still parse their options in full, for their role.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from ..client.keys import normalize_options
from ..errors import ConfigError
from ._common import SINK_OPTIONS, SOURCE_IGNORED, SOURCE_OPTIONS, _reject_unknown
from .sink import SinkOptions
from .source import SourceOptions

_SUBSCRIPTIONS = frozenset(("subscribe", "subscribepattern", "assign"))
_SINK_ONLY = frozenset(k.lower() for k in SINK_OPTIONS if k not in SOURCE_OPTIONS)


def check_any_role(options: Mapping[str, str]) -> None:
    """Raise the :class:`ConfigError` the options get in whatever role they can have."""
    keys = set(normalize_options(options))
    if keys & _SUBSCRIPTIONS:  # a read: wrong for a batch and a streaming one alike?
        errors: list[ConfigError] = []
        with _quiet():  # the reader parses again and warns once
            for streaming in (True, False):
                try:
                    SourceOptions.parse(options, streaming=streaming)
                    return
                except ConfigError as exc:
                    errors.append(exc)
        raise errors[0]
    if keys & _SINK_ONLY:
        SinkOptions.parse(options)
        return
    # Neither: a write that names its topic in a column, or a read missing its subscription.
    _reject_unknown(normalize_options(options),
                    dict.fromkeys(SOURCE_OPTIONS + SOURCE_IGNORED + SINK_OPTIONS),
                    "source or sink")


@contextmanager
def _quiet() -> Iterator[None]:
    log = logging.getLogger(SourceOptions.__module__)
    was, log.disabled = log.disabled, True
    try:
        yield
    finally:
        log.disabled = was
