"""pysyncobj's resend-truncation CRITICAL is logged as a rate-limited WARNING; other records pass."""

from __future__ import annotations

import logging

from services.controller.raft_logging import ResendTruncationFilter


def record(msg: str, level: int = logging.CRITICAL) -> logging.LogRecord:
    return logging.LogRecord("pysyncobj.syncobj", level, __file__, 1, msg, (5, 7), None)


def test_resend_truncation_is_a_rate_limited_warning() -> None:
    f = ResendTruncationFilter()
    text = "truncating already-applied log entries from index %d (last applied: %d) - state machine may have diverged"
    first = record(text)
    assert f.filter(first)
    assert first.levelno == logging.WARNING and first.levelname == "WARNING"
    assert "0 more like this" in first.getMessage() and "index 5" in first.getMessage()
    assert not f.filter(record(text))
    assert not f.filter(record(text))
    f._last -= f.INTERVAL_S  # a minute later
    again = record(text)
    assert f.filter(again) and "2 more like this" in again.getMessage()


def test_other_records_are_untouched() -> None:
    f = ResendTruncationFilter()
    other = record("something else %d %d")
    assert f.filter(other) and other.levelno == logging.CRITICAL
