"""EOSKAFKA_LOG_LEVEL (eos_kafka_source/logs.py); that the lines reach a driver's log is
tests/spark/test_log_lines.py."""

from __future__ import annotations

import logging

from eos_kafka_source import logs


def test_log_level_setting() -> None:
    """configure(): the level and one stderr handler, idempotent; a bad value ignored."""
    logger = logging.getLogger(logs.LOGGER)
    saved = (logger.level, list(logger.handlers), logger.propagate)
    try:
        logs.configure({logs.ENV: "info"})
        logs.configure({logs.ENV: "info"})
        assert logger.level == logging.INFO and not logger.propagate
        assert sum(isinstance(h, logs._Stderr) for h in logger.handlers) == 1
        logs.configure({logs.ENV: "loud"})
        assert logger.level == logging.INFO
    finally:
        logger.level, logger.handlers, logger.propagate = saved[0], saved[1], saved[2]
