"""The errors of the remoting codec.

``RemotingProtocolError`` means the byte stream itself is broken (a frame, its mark or its header): the
connection cannot be trusted to be in step any more and must be closed. ``HeaderFieldError`` and
``BodyError`` mean one command carried a bad custom header field or body: the frame was intact, so a
server answers that command with an error and keeps the connection.
"""

from __future__ import annotations


class RemotingError(ValueError):
    """Base class of every error raised while decoding or encoding remoting data."""


class RemotingProtocolError(RemotingError):
    """A malformed frame or command header; the connection must be dropped."""


class HeaderFieldError(RemotingError):
    """A custom header field (an extFields entry) is missing, malformed or out of range."""

    def __init__(self, header: str, field: str, problem: str) -> None:
        super().__init__(f"{header}: field '{field}' {problem}")
        self.header = header
        self.field = field


class BodyError(RemotingError):
    """A command body is not the JSON (or the shape) its request code calls for."""
