"""mqctl's broker status commands against a real replicated group (three controllers, two brokers): clusterList
lists both replicas with their runtime info, brokerStatus shows the commitlog's offsets and the put total,
topicStatus each queue's offsets, consumerProgress the lag per queue after a commit, with and without -g,
and consumerConnection the group's client; every figure is what the broker holds."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from services.common.remoting_client import RemotingClient
from services.remoting import broker_bodies as bb
from services.remoting.command import RemotingCommand, RequestCode, make_request
from tests.integration.conftest import group_cluster, poll, run_cli
from tests.integration.test_broker import sync_state

pytestmark = pytest.mark.integration

RC = RequestCode


async def _ask(address: str, requests: list[RemotingCommand]) -> list[RemotingCommand]:
    client = RemotingClient(timeout_s=8.0)
    try:
        return [await client.call(address, request) for request in requests]
    finally:
        await client.close()


def ok(*args: str) -> Any:
    done = run_cli(*args, "--format", "json")
    assert done.returncode == 0, f"{args}: {done.stderr}"
    return json.loads(done.stdout)


def test_status_commands_against_a_replicated_group(tmp_path: Path) -> None:
    with group_cluster(tmp_path, "broker-a", 2) as (controllers, _):
        state = poll(lambda: (s := _state(controllers)) and s.get("masterBrokerId") and
                     len(s.get("inSyncReplicas", [])) == 2 and s, 90, "a master and both replicas in sync")
        master, ns = state["masterAddress"], controllers.addresses
        sent = run_cli("sendMessage", "-t", "StatsTopic", "-p", "hello", "--brokerAddr", master, "-q", "1",
                       "--count", "5")
        assert sent.returncode == 0, sent.stderr
        beat = bb.HeartbeatData("10.9.9.9@1", (), (bb.ConsumerData(
            "statsGroup", "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_FIRST_OFFSET",
            (bb.SubscriptionData("StatsTopic", "*"),)),))
        commit = {"consumerGroup": "statsGroup", "topic": "StatsTopic", "queueId": "1", "commitOffset": "3"}
        asyncio.run(_ask(master, [make_request(RC.HEART_BEAT, 0, {}, beat.encode()),
                                  make_request(RC.UPDATE_CONSUMER_OFFSET, 0, commit)]))

        brokers = poll(lambda: b if len(b := ok("clusterList", "-n", ns)["brokers"]) == 2 else None, 60,
                       "both replicas in the cluster info")
        assert {b["brokerName"] for b in brokers} == {"broker-a"}
        assert all(b["runtime"] and b["runtime"]["brokerVersionDesc"] == "V5_3_3" for b in brokers)
        status = ok("brokerStatus", "-b", master)["brokers"][0]["runtime"]
        assert status["msgPutTotalTodayNow"] == "5" and int(status["commitLogMaxOffset"]) > 0
        assert status["brokerActive"] == "true"

        queues = poll(lambda: ok("topicStatus", "-n", ns, "-t", "StatsTopic")["queues"] or None, 60, "a route")
        assert [(q["queueId"], q["minOffset"], q["maxOffset"]) for q in queues if q["maxOffset"]] == [(1, 0, 5)]
        progress = ok("consumerProgress", "-n", ns, "-g", "statsGroup")
        assert progress["diffTotal"] == 2
        assert [(q["queueId"], q["brokerOffset"], q["consumerOffset"], q["lag"]) for q in progress["queues"]
                if q["brokerOffset"]] == [(1, 5, 3, 2)]
        groups = ok("consumerProgress", "-n", ns)["groups"]
        assert [(g["group"], g["diff"]) for g in groups] == [("statsGroup", 2)]
        text = run_cli("consumerProgress", "-n", ns, "-g", "statsGroup", "--format", "mqadmin").stdout
        assert text.endswith("\nConsume TPS: 0.00\nConsume Diff Total: 2\nConsume Inflight Total: 0\n")


def _state(controllers: Any) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = sync_state(controllers, "broker-a")
        return found
    except IndexError:
        return None
