"""Answers are hostile until checked: their size is bounded and they must arrive within --timeout."""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import SimpleNamespace

import httpx
import pytest

from services.broker import contract as bc
from services.common import controller_client, wire
from services.controller import contract
from tests.unit.cli.conftest import LEADER, MASTER, FakeCluster, Invoke, assert_one_line_error

LIMIT = 2**20  # 1 MiB: enough to exercise the bound cheaply


@pytest.fixture(autouse=True)
def small_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "MAX_ANSWER_BYTES", LIMIT)


def endless(chunk: bytes = b"x" * 65536) -> Iterator[bytes]:
    while True:
        yield chunk


def test_an_oversized_controller_answer_is_refused(mqctl: Invoke, fake: FakeCluster) -> None:
    fake.override(LEADER, contract.METADATA, httpx.Response(200, content=endless()))
    result = mqctl("getControllerMetaData", "-a", LEADER)
    line = assert_one_line_error(result, 4)
    assert line == "Error: controller 127.0.0.1:9878 answered more than 1 MiB; refused [SYSTEM_ERROR]"


def test_an_oversized_broker_answer_is_refused(mqctl: Invoke, fake: FakeCluster) -> None:
    fake.override(MASTER, bc.HA_STATUS, httpx.Response(200, content=endless()))
    result = mqctl("haStatus", "--brokerAddr", MASTER, "--format", "json")
    assert '"error": "broker 127.0.0.1:10911 answered more than 1 MiB; refused [SYSTEM_ERROR]"' in result.stdout
    assert_one_line_error(result, 3, "no status from broker 127.0.0.1:10911")


def test_an_answer_that_never_ends_is_cut_at_the_deadline(mqctl: Invoke, fake: FakeCluster,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]

    def trickle() -> Iterator[bytes]:  # one byte per simulated second: below the size limit for long
        while True:
            now[0] += 1.0
            yield b" "

    clock = SimpleNamespace(monotonic=lambda: now[0], sleep=time.sleep)
    for module in (controller_client, wire):
        monkeypatch.setattr(module, "time", clock)
    fake.override(LEADER, contract.METADATA, httpx.Response(200, content=trickle()))
    result = mqctl("getControllerMetaData", "-a", LEADER, timeout="5")
    line = assert_one_line_error(result, 3)
    assert line == "Error: no controller reachable at 127.0.0.1:9878"
    assert now[0] <= 1000.0 + 7  # cut soon after --timeout, not when the server stops
