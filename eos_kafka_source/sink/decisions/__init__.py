"""The decision log and its states: what the driver decided, durable before the first
EndTxn, beside the checkpoint (docs/design.md, part 3)."""
