"""Unit tests start nothing: no process, no JVM (those tests live in tests/integration and tests/spark)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def no_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a unit test started a process: move it to tests/integration (or tests/spark)")
    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    yield
