"""Errors of the Spark reports.

``spark_reports`` must import on its own (``spark-submit --py-files spark_reports.zip``), so it has its own
small exception tree instead of ``services.common.errors``. Each error carries the exit code the CLI maps
it to; ``mqctl report`` translates them once, at its boundary.
"""

from __future__ import annotations

import re


class ReportError(Exception):
    """Base: a report could not be produced. ``exit_code`` follows mqctl's convention."""

    exit_code = 1

    def __init__(self, remark: str) -> None:
        super().__init__(remark)
        self.remark = remark


class DatasetError(ReportError):
    """The input dataset is missing, unreadable or malformed (the caller's input: a usage error)."""

    exit_code = 2


class OutputError(ReportError):
    """The output directory cannot be created or written (the caller's choice: a usage error)."""

    exit_code = 2


class SparkSetupError(ReportError):
    """Spark could not start: no suitable Java, a JVM that exited, a bad setting."""

    exit_code = 1


class MasterUnreachableError(ReportError):
    """The Spark master given with ``--spark-master`` does not accept connections."""

    exit_code = 3


class SettingError(ReportError):
    """A malformed option, e.g. a ``--conf`` that is not ``key=value``."""

    exit_code = 2


def spark_messages(exc: BaseException) -> list[str]:
    """First lines of a Spark failure, outermost first: the Python message, then the Java exception's
    message and its causes' (where the useful detail usually is)."""
    messages = [clean_message(str(exc))]
    throwable = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    while throwable is not None and len(messages) < 12:
        try:
            messages.append(clean_message(str(throwable.getMessage() or "")))
            throwable = throwable.getCause()
        except Exception:  # noqa: BLE001 - the JVM may be gone; what we have is enough
            break
    unique = [m for i, m in enumerate(messages) if m and m not in messages[:i]]
    return unique or [type(exc).__name__]


def clean_message(message: str) -> str:
    """The first meaningful line, without py4j's preamble and Spark's SQLSTATE suffix."""
    lines = [line.strip() for line in message.strip().splitlines()]
    lines = [line for line in lines if line and not line.startswith(("An error occurred while calling", "at "))]
    first = lines[0].lstrip(": ") if lines else ""
    for prefix in ("org.apache.spark.SparkException: ", "java.lang.IllegalArgumentException: "):
        first = first.removeprefix(prefix)
    return re.sub(r"\s*SQLSTATE: \w+\s*$", "", first).strip()[:400]
