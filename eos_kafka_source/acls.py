"""What a refused request needed: the resource, the operation, and the ACL to add.

Kafka answers a request the principal may not make with one of four codes
(TOPIC_, GROUP_, CLUSTER_ and TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and nothing
else. Which operation it checked follows from the request (Kafka's
``KafkaApis``: OffsetCommit needs READ on the group and on the topic, Produce
WRITE on both the transactional id and the topic, ...), so the error built here
names the resource, the operation and a ready ``kafka-acls.sh`` line. Names
eoskafka derives from a prefix (``<prefix>-<n>`` ids, ``<prefix>.eoskafka-*``
groups) get a prefixed ACL on the prefix: one ACL covers the whole pool
(docs/design.md invariant 11). docs/acls.md lists the full set per role.

Who asks and where (principal, bootstrap servers) is only known to the
connection: :func:`remember_client` records it per thread when a request is sent.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from dataclasses import dataclass

from .kafka_codes import Code

#: (principal, bootstrap servers) of the last connection that sent a request here.
_CLIENT: ContextVar[tuple[str | None, str]] = ContextVar("eoskafka_client",
                                                          default=(None, "BROKER:9092"))

#: Group names eoskafka derives from a transactional-id prefix (sink/driver/claims.py).
CLAIM_SUFFIX = ".eoskafka-claim"
ABORTED_INFIX = ".eoskafka-aborted."
#: The transactional id a recovery copy is written on: ``<prefix>-recovery``.
RECOVERY_SUFFIX = "recovery"

_CODE_KIND: dict[int, str] = {
    Code.TOPIC_AUTHORIZATION_FAILED: "TOPIC", Code.GROUP_AUTHORIZATION_FAILED: "GROUP",
    Code.CLUSTER_AUTHORIZATION_FAILED: "CLUSTER",
    Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "TRANSACTIONAL_ID"}
_FLAG = {"TOPIC": "--topic", "GROUP": "--group", "TRANSACTIONAL_ID": "--transactional-id",
         "CLUSTER": "--cluster"}
_LABEL = {"TOPIC": "topic", "GROUP": "group", "TRANSACTIONAL_ID": "transactional id",
          "CLUSTER": "cluster"}

#: Request name -> resource kind -> operation Kafka checks (kafka/server/KafkaApis.scala).
_OPERATION: dict[str, dict[str, str]] = {
    "Metadata": {"TOPIC": "DESCRIBE"},
    "DescribeConfigs": {"TOPIC": "DESCRIBE_CONFIGS", "CLUSTER": "DESCRIBE_CONFIGS"},
    "CreateTopics": {"TOPIC": "CREATE", "CLUSTER": "CREATE"},
    "CreatePartitions": {"TOPIC": "ALTER"},
    "OffsetCommit": {"GROUP": "READ", "TOPIC": "READ"},
    "OffsetFetch": {"GROUP": "DESCRIBE", "TOPIC": "DESCRIBE"},
    "Fetch": {"TOPIC": "READ"},
    "ListOffsets": {"TOPIC": "DESCRIBE"},
    "Produce": {"TOPIC": "WRITE", "TRANSACTIONAL_ID": "WRITE"},
    "InitProducerId": {"TRANSACTIONAL_ID": "WRITE", "CLUSTER": "IDEMPOTENT_WRITE",
                       "TOPIC": "WRITE"},
    "AddPartitionsToTxn": {"TRANSACTIONAL_ID": "WRITE", "TOPIC": "WRITE"},
    "EndTxn": {"TRANSACTIONAL_ID": "WRITE"},
    "FindCoordinator": {"TRANSACTIONAL_ID": "DESCRIBE", "GROUP": "DESCRIBE"},
    "DescribeTransactions": {"TRANSACTIONAL_ID": "DESCRIBE"},
    "DescribeProducers": {"TOPIC": "READ"},
}


def remember_client(principal: str | None, bootstrap: str) -> None:
    """Called by the connection before each request: whom a refusal's ACL must name."""
    _CLIENT.set((principal, bootstrap))


@dataclass(frozen=True)
class Refusal:
    """A refused operation on one resource, and the ACL that grants it."""

    kind: str            # TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID
    name: str            # the resource's name ("kafka-cluster" for CLUSTER)
    operation: str       # READ, WRITE, DESCRIBE, ...
    acl_name: str        # the name the ACL should carry (a prefix for derived names)
    prefixed: bool
    principal: str | None
    bootstrap: str

    def resource(self) -> str:
        if self.kind == "CLUSTER":
            return "the cluster"
        return f"{_LABEL[self.kind]} {self.name!r}"

    def command(self) -> str:
        """The ``kafka-acls.sh`` line that grants it (run with an admin's credentials)."""
        who = f"User:{self.principal}" if self.principal else "User:<your principal>"
        parts = ["kafka-acls.sh", "--bootstrap-server", self.bootstrap,
                 "--command-config", "admin.properties", "--add", "--allow-principal", who,
                 "--operation", _camel(self.operation), _FLAG[self.kind]]
        if self.kind != "CLUSTER":
            parts.append(self.acl_name)
        if self.prefixed:
            parts += ["--resource-pattern-type", "prefixed"]
        return " ".join(parts)

    def message(self, code: int, code_name: str, context: str) -> str:
        who = f"User:{self.principal}" if self.principal else "this principal"
        grant = (f"prefixed on {self.acl_name!r}" if self.prefixed else "")
        if self.operation == "DESCRIBE":
            grant = ", ".join(filter(None, [grant, "or READ/WRITE, which include DESCRIBE"]))
        return (f"{who} may not {self.operation} {self.resource()}; add the ACL"
                f"{' (' + grant + ')' if grant else ''}: {self.command()}"
                f"  (Kafka error {code} {code_name} on {context}; every ACL eoskafka needs: "
                "docs/acls.md)")


def refusal(code: int, context: str, resource: tuple[str, str] | None = None) -> Refusal:
    """The refusal a Kafka authorization ``code`` on a request described by ``context`` means.

    ``resource`` (kind, name) is given by callers that know it better (an idempotent
    producer's CLUSTER refusal is best fixed by WRITE on its topic); otherwise the name is
    read from ``context``, whose shapes are the ones the wire modules write.
    """
    kind = resource[0] if resource else _CODE_KIND[code]
    request = context.split(" ", 1)[0]
    operation = _OPERATION.get(request, {}).get(kind, "the operation")
    name = resource[1] if resource else _name_from(kind, context)
    acl_name, prefixed = _acl_name(kind, name)
    principal, bootstrap = _CLIENT.get()
    return Refusal(kind, name, operation, acl_name, prefixed, principal, bootstrap)


def _name_from(kind: str, context: str) -> str:
    if kind == "CLUSTER":
        return "kafka-cluster"
    quoted = re.search(r"'([^']+)'", context)
    words = context.split()
    if kind == "TOPIC":
        pair = re.search(r"\('([^']+)', \d+\)", context)  # Produce to ('t', 0), [('t', 0)]
        if pair:
            return pair.group(1)
        if quoted:
            return quoted.group(1)
        # "<Request> [group] <topic>-<partition>", "<Request> <topic>", or either followed
        # by " by <producer>" ("Produce to t-0 by idempotent producer")
        words = context.split(" by ", 1)[0].split()
        last = words[-1] if len(words) > 1 else ""
        head, _, tail = last.rpartition("-")
        return head if tail.isdigit() and head else last
    if kind == "TRANSACTIONAL_ID":
        # "InitProducerId for transactional id 'p-0'", "AddPartitionsToTxn p-0 [...]",
        # "EndTxn commit p-0 (producer ...)", "Produce to ('t', 0) by p-0"
        named = re.search(r"transactional id '([^']+)'", context)
        if named:
            return named.group(1)
        if words[0] == "AddPartitionsToTxn" and len(words) > 1:
            return words[1]
        if words[0] == "EndTxn" and len(words) > 2:
            return words[2]
        if " by " in context:
            return context.rsplit(" by ", 1)[1].split(":", 1)[0].strip()
    if quoted:
        return quoted.group(1)
    return words[1] if len(words) > 1 else "?"


def _acl_name(kind: str, name: str) -> tuple[str, bool]:
    """The prefix eoskafka derived ``name`` from, when it did; else the name itself."""
    if kind == "TRANSACTIONAL_ID":
        head, _, tail = name.rpartition("-")
        if head and (tail.isdigit() or tail == RECOVERY_SUFFIX):
            return head, True
    if kind == "GROUP":
        if name.endswith(CLAIM_SUFFIX):
            return name[: -len(CLAIM_SUFFIX)], True
        if ABORTED_INFIX in name:
            return name.split(ABORTED_INFIX, 1)[0], True
    return name, False


def _camel(operation: str) -> str:
    return "".join(part.title() for part in operation.split("_"))
