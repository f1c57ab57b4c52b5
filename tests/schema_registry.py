"""The format tests' schema registry: Apicurio Registry, as eos_kafka_source/apicurio.py runs it.

    python -m tests.schema_registry fetch    # fetch and extract once (make registry-app)

To run one by hand: ``eoskafka registry`` (docs/formats.md).
"""

from __future__ import annotations

import sys

from eos_kafka_source.apicurio import (
    CCOMPAT,
    MIN_JAVA,
    VERSION,
    ApicurioRegistry,
    RegistryUnavailableError,
    find_java,
    registry_home,
)

__all__ = ["CCOMPAT", "MIN_JAVA", "VERSION", "ApicurioRegistry", "RegistryUnavailableError",
           "find_java", "registry_home"]


def main(argv: list[str]) -> int:
    if argv not in ([], ["fetch"]):
        print(f"usage: python -m tests.schema_registry [fetch], not {argv!r}; to run a "
              "registry: eoskafka registry", file=sys.stderr)
        return 2
    java = find_java()
    print(f"Apicurio Registry {VERSION} in {registry_home()}; Java: {java}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
