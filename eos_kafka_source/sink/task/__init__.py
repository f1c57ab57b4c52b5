"""The task side of the sink (executors): each task writes its rows inside an open Kafka
transaction and hands it over, uncommitted, to the driver (docs/design.md, part 1)."""
