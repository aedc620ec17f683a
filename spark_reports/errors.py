"""Errors of the Spark reports.

``spark_reports`` must import on its own (``spark-submit --py-files spark_reports.zip``), so it has its own
small exception tree instead of ``services.common.errors``. Each error carries the exit code the CLI maps
it to; ``mqctl report`` translates them once, at its boundary.
"""

from __future__ import annotations


class ReportError(Exception):
    """Base: a report could not be produced. ``exit_code`` follows mqctl's convention."""

    exit_code = 1

    def __init__(self, remark: str) -> None:
        super().__init__(remark)
        self.remark = remark


class DatasetError(ReportError):
    """The input dataset is missing, unreadable or malformed (the caller's input: a usage error)."""

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
