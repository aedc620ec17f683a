"""What can go wrong with the kit, each with a message that names the problem and what to do."""

from __future__ import annotations


class KitError(Exception):
    """Base of the kit's errors: the message is meant for a person and says what to do."""


class ToolMissing(KitError):
    """java or mvn is not installed, or is too old."""


class ArtifactUnavailable(KitError):
    """Maven could not resolve the jars: the registry is unreachable or does not serve an artifact."""

    def __init__(self, message: str, artifacts: tuple[str, ...]) -> None:
        super().__init__(message)
        self.artifacts = artifacts


class ProcessExited(KitError):
    """A server exited before it was ready (the message ends with the tail of its logs)."""


class NotReady(KitError):
    """A server or the cluster did not answer as expected within its deadline."""
