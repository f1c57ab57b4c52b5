"""The packages each payload format needs, and the error naming the extra that brings them.

The formats' packages are optional ([avro], [protobuf], [json], or [schemas] for all three),
and they are needed in the Python of the driver (the schema is mapped when the query starts)
and of every executor (records are decoded and encoded in the tasks). A missing one fails
where it is first needed with the extra to install, not a bare ModuleNotFoundError.
"""

from __future__ import annotations

import importlib
import socket
import sys

from ..errors import ConfigError

#: codec module -> (the format's option value, its extra, the packages it imports)
NEEDS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "avro": ("avro", "avro", ("numpy", "fastavro")),
    "protobuf": ("protobuf", "protobuf", ("numpy", "google.protobuf")),
    "json_schema": ("json", "json", ("numpy", "jsonschema", "referencing")),
}


def _missing(packages: tuple[str, ...]) -> list[str]:
    missing = []
    for package in packages:
        try:
            importlib.import_module(package)
        except ImportError:
            missing.append(package)
    return missing


def require(module: str) -> None:
    """Raise ConfigError naming the extra when a package ``module``'s format needs is not
    installed in this Python."""
    if module not in NEEDS:
        return
    fmt, extra, packages = NEEDS[module]
    missing = _missing(packages)
    if not missing:
        return
    names = ", ".join(m.replace("google.protobuf", "protobuf") for m in missing)
    raise ConfigError(
        f"valueFormat/keyFormat {fmt} needs the Python package(s) {names}, not installed in "
        f"{sys.executable} on {socket.gethostname()}: install eoskafka with its [{extra}] "
        f"extra (or [schemas], every format's) in the Python of the driver and of every "
        f"executor (from the wheel: pip install 'eoskafka-<version>-py3-none-any.whl[{extra}]'; "
        f"from a clone: pip install '.[{extra}]')")
