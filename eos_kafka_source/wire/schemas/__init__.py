"""Kafka protocol schemas kafka-python 3.0 does not ship (the delegation-token requests),
written from Kafka's protocol for wire/delegation.py, which declares the request classes."""
