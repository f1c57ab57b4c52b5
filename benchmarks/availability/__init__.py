"""What faults do: availability under Kafka's operations (``make availability``) and
duplicates at-least-once vs exactly-once under the same faults (``make contrast``)."""
