"""The exception tree shared by the services and the CLI.

Errors carry data (a response code, a remark, whether a retry may help), never only prose; the CLI maps
them to exit codes in one place (``mqctl.cli``).
"""

from __future__ import annotations

from typing import Any

from services.common.codes import RETRIABLE_CODES, code_name


class MqctlError(Exception):
    """Base of every error this project raises on purpose."""

    exit_code = 1

    def __init__(self, remark: str) -> None:
        super().__init__(remark)
        self.remark = remark


class UsageError(MqctlError):
    """The caller asked for something malformed (bad flag value, bad config file)."""

    exit_code = 2


class AddressError(UsageError):
    """A ``host:port`` that is malformed: from the operator a usage error; from a server, shown as its fault."""


class ConfigError(UsageError):
    """A configuration file or value is invalid."""


class UnreachableError(MqctlError):
    """No listed server answered (connection refused, timeout, DNS failure)."""

    exit_code = 3

    def __init__(self, remark: str, addresses: list[str] | None = None) -> None:
        super().__init__(remark)
        self.addresses = list(addresses or [])


class RemoteError(MqctlError):
    """A server answered with a non-SUCCESS response code."""

    exit_code = 4

    def __init__(self, code: int, remark: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(remark)
        self.code = code
        self.data = data or {}

    @property
    def code_name(self) -> str:
        return code_name(self.code)

    @property
    def retriable(self) -> bool:
        return self.code in RETRIABLE_CODES

    def __str__(self) -> str:
        return f"{self.remark} [{self.code_name}]"
