"""Keep the SASL and SSL passwords out of logs and error messages.

kafka-python logs every request it sends at DEBUG, raw bytes included
(``kafka.protocol.parser`` "Send: ...", ``kafka.net.connection`` "Request N:
..."). A SASL/PLAIN ``SaslAuthenticate`` carries the password in the clear, so
with DEBUG logging on (``eoskafka -vv``, a notebook's ``logging.basicConfig``)
the password would be printed. :func:`protect` registers a connection's
secrets and puts a filter on every ``kafka`` and ``eos_kafka_source`` logger
that replaces them, in any of the forms a log line can show them (plain, or
escaped inside a ``str``/``bytes`` repr), with ``***``. :func:`redact` does the
same for a text eoskafka puts into an exception.

The secrets stay in this process only: nothing here is pickled or written.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

#: Loggers (and their descendants) whose records are filtered.
LOGGER_PREFIXES = ("kafka", "eos_kafka_source")
MASK = "***"


def _bytes_escaped(data: bytes, quote: str) -> str:
    """``data`` as it appears inside ``repr(bytes)`` delimited by ``quote``."""
    out = []
    for byte in data:
        ch = chr(byte)
        if ch == "\\" or ch == quote:
            out.append("\\" + ch)
        elif ch in "\t\n\r":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r"}[ch])
        elif 32 <= byte < 127:
            out.append(ch)
        else:
            out.append(f"\\x{byte:02x}")
    return "".join(out)


def forms(secret: str) -> set[str]:
    """Every way ``secret`` can be spelled in a log line: as is, inside a ``str`` repr,
    inside a ``bytes``/``bytearray`` repr (UTF-8, either quote style)."""
    in_str = repr(secret + "'\"")[1:-4]  # both quotes force the single-quote style
    found = {secret, in_str, in_str.replace("\\'", "'"),
             secret.encode("unicode_escape").decode("ascii")}
    encoded = secret.encode("utf-8", "surrogatepass")
    found |= {_bytes_escaped(encoded, "'"), _bytes_escaped(encoded, '"')}
    return {f for f in found if f}


class _SecretFilter(logging.Filter):
    """Rewrites a log record whose message contains a registered secret."""

    def __init__(self) -> None:
        super().__init__("eoskafka-redact")
        self._forms: tuple[str, ...] = ()
        self._lock = threading.Lock()

    def add(self, secrets: Iterable[str]) -> None:
        with self._lock:
            known = set(self._forms)
            for secret in secrets:
                known |= forms(secret)
            # Longest first, so a form that contains another is replaced whole.
            self._forms = tuple(sorted(known, key=len, reverse=True))

    def redact(self, text: str) -> str:
        for form in self._forms:
            if form in text:
                text = text.replace(form, MASK)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._forms:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a broken record is logging's problem, not ours
            return True
        cleaned = self.redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        if record.exc_info and not record.exc_text:
            text = logging.Formatter().formatException(record.exc_info)
            cleaned = self.redact(text)
            if cleaned != text:  # the traceback text replaces the exception object
                record.exc_info, record.exc_text = None, cleaned
        return True


_FILTER = _SecretFilter()


def _install() -> None:
    """Put the filter on every existing logger under :data:`LOGGER_PREFIXES` (a logger's
    filters see only the records logged on it, not its children's, hence each one)."""
    manager = logging.Logger.manager
    names = [n for n in list(manager.loggerDict)
             if any(n == p or n.startswith(p + ".") for p in LOGGER_PREFIXES)]
    for name in [*LOGGER_PREFIXES, *names]:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


def protect(secrets: Iterable[str | None]) -> None:
    """Register secrets (None and empty values are skipped) and filter the loggers."""
    values = [s for s in secrets if s]
    if values:
        _FILTER.add(values)
    _install()


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by ``***``."""
    return _FILTER.redact(text)
