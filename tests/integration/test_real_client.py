"""A RocketMQ client nobody here wrote uses our cluster: the Apache RocketMQ C++ client (PyPI ``rocketmq==0.4.4``,
a ctypes wrapper around its own ``librocketmq.so``) with our controllers as its name server.

* Its ``Producer`` finds the broker through the controllers (GET_ROUTEINFO_BY_TOPIC, falling back to
  TBW102 for a new topic) and sends messages with keys and tags (a large one compressed by the client, and
  a batch); its ``PullConsumer`` reads them back; its ``PushConsumer`` consumes them in a group whose
  offsets the broker keeps: the group's next run gets only what was sent after, filtered by its tag.
* Across a SIGKILL of the master of a three-replica group (``allAckInSyncStateSet``), the producer keeps
  sending: it learns the new master from its name server (the controllers, which then route the group's
  broker 0 to the new master), and later sends are acknowledged there (the only live broker that takes
  sends: slaves refuse them). Every message the client was told was sent is read back from the new master.

Each client runs in its own process with a bounded time; the client's log goes under ``$HOME/logs``,
with ``HOME`` in the test's directory, and is printed on failure.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.common.codes import ResponseCode
from services.common.remoting_client import RemotingClient
from services.remoting.command import RequestCode, make_request
from tests.integration.conftest import poll
from tests.integration.test_broker import FAST_BROKER, sync_state, wait_role

pytestmark = pytest.mark.integration

CLIENT_TIMEOUT_S = 120.0
HA = {**FAST_BROKER, "allAckInSyncStateSet": "true", "haSendHeartbeatInterval": 300, "checkSyncStateSetPeriod": 500,
      "haHousekeepingInterval": 3000, "haMaxTimeSlaveNotCatchup": 3000}
BIG = "x" * 10_000  # over the client's 4 KiB threshold: sent compressed, stored so, inflated by the consumer

PRODUCER = r"""
import os, sys, time
from rocketmq.client import Message, Producer
namesrv, topic, count, stop_file = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
producer = Producer("mqctl-real-client-producer")
producer.set_namesrv_addr(namesrv)
producer.start()
big = "x" * 10000
index = 0
deadline = time.time() + 100
while (index < count if count >= 0 else not os.path.exists(stop_file)) and time.time() < deadline:
    message = Message(topic)
    message.set_keys("seq-%d" % index)
    message.set_tags("tagA" if index % 2 == 0 else "tagB")
    message.set_body(big if index == 3 else "body-%d" % index)
    for attempt in range(3):  # the client's first send can fail while its connection to the broker opens
        try:
            result = producer.send_sync(message)
            print("OK", index, result.msg_id, flush=True)
            break
        except Exception as exc:
            print("FAIL", index, type(exc).__name__, str(exc).splitlines()[0][:200], flush=True)
            time.sleep(0.2)
    index += 1
if count > 0:
    batch = []
    for extra in range(3):
        message = Message(topic)
        message.set_keys("batch-%d" % extra)
        message.set_tags("tagA")
        message.set_body("batch-body-%d" % extra)
        batch.append(message)
    producer.send_batch(batch)
    print("BATCH-OK", flush=True)
producer.shutdown()
print("DONE", flush=True)
"""

PULL_CONSUMER = r"""
import sys
from rocketmq.client import PullConsumer
consumer = PullConsumer("mqctl-real-client-pull")
consumer.set_namesrv_addr(sys.argv[1])
consumer.start()
for message in consumer.pull(sys.argv[2]):
    body = message.body.decode()
    print("MSG", message.queue_id, message.queue_offset, message.keys.decode(), message.tags.decode(),
          body if len(body) < 100 else "BIG:%d:%s" % (len(body), set(body)), flush=True)
consumer.shutdown()
print("DONE", flush=True)
"""

PUSH_CONSUMER = r"""
import sys, threading, time
from rocketmq.client import PushConsumer
namesrv, topic, group, expression, want = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
seen = []
lock = threading.Lock()  # the client calls back on several threads: one whole line at a time
def on_message(message):
    with lock:
        seen.append(message.keys.decode())
        print("MSG", message.keys.decode(), message.tags.decode(), flush=True)
consumer = PushConsumer(group)
consumer.set_namesrv_addr(namesrv)
consumer.subscribe(topic, on_message, expression)
consumer.start()
deadline = time.time() + 60
while len(seen) < want and time.time() < deadline:
    time.sleep(0.1)
consumer.shutdown()  # commits the group's offsets to the broker
print("DONE", len(seen), flush=True)
"""





class Client:
    """One client process; its output lines are collected as they come."""

    def __init__(self, script: str, args: list[str], home: Path) -> None:
        env = {**os.environ, "HOME": str(home)}
        self.home = home
        self.process = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, env=env)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait(self, timeout: float = CLIENT_TIMEOUT_S) -> list[str]:
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"the client did not finish within {timeout:.0f} s:\n" + self.describe())
        self._reader.join(10)
        assert self.lines and self.lines[-1].startswith("DONE"), self.describe()
        return self.lines

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def describe(self) -> str:
        logs = sorted((self.home / "logs" / "rocketmq-cpp").glob("*"))
        log = "".join(p.read_text(errors="replace") for p in logs)
        return "\n".join(self.lines[-40:]) + "\n--- client log ---\n" + log[-4000:]

    def words(self, tag: str) -> list[list[str]]:
        return [line.split()[1:] for line in list(self.lines) if line.startswith(tag + " ")]


def run(script: str, home: Path, *args: str) -> Client:
    client = Client(script, list(args), home)
    client.wait()
    return client


def queue_offsets(address: str, topic: str, group: str) -> dict[int, tuple[int, int]]:
    """queue id -> (the group's committed offset, the queue's max offset), asked over remoting."""
    async def ask() -> dict[int, tuple[int, int]]:
        client = RemotingClient(5.0)
        result = {}
        try:
            for queue in range(4):
                ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue)}
                committed = await client.call(address, make_request(RequestCode.QUERY_CONSUMER_OFFSET, 0, {
                    **ext, "setZeroIfNotFound": "false"}))
                top = await client.call(address, make_request(RequestCode.GET_MAX_OFFSET, 0, ext))
                mine = int(committed.ext_fields["offset"]) if committed.code == ResponseCode.SUCCESS else -1
                result[queue] = (mine, int(top.ext_fields["offset"]))
        finally:
            await client.close()
        return result

    return asyncio.run(ask())


def test_cpp_producer_and_consumers_use_our_cluster(cpp_client: None, controllers: ControllerCluster,
                                                    brokers: list[BrokerNode], tmp_path: Path) -> None:
    node = make_broker(tmp_path, "broker-a", 1, controllers.addresses, **FAST_BROKER)
    brokers.append(node)
    node.start()
    wait_role(node, "MASTER")
    namesrv, topic = controllers.addresses, "RealClientTopic"

    producer = run(PRODUCER, tmp_path, namesrv, topic, "12", str(tmp_path / "unused"))
    assert [w[0] for w in producer.words("OK")] == [str(i) for i in range(12)], producer.describe()
    assert "BATCH-OK" in producer.lines

    pulled = run(PULL_CONSUMER, tmp_path, namesrv, topic)
    got = {w[2]: (w[3], w[4]) for w in pulled.words("MSG")}
    assert set(got) == {f"seq-{i}" for i in range(12)} | {f"batch-{i}" for i in range(3)}, pulled.describe()
    assert got["seq-0"] == ("tagA", "body-0") and got["seq-5"] == ("tagB", "body-5")
    assert got["seq-3"] == ("tagB", "BIG:10000:{'x'}")  # compressed by the client, inflated by the client
    assert got["batch-1"] == ("tagA", "batch-body-1")

    first = run(PUSH_CONSUMER, tmp_path, namesrv, topic, "mqctl-push-group", "*", "15")
    assert sorted(w[0] for w in first.words("MSG")) == sorted(got), first.describe()
    committed = queue_offsets(node.address, topic, "mqctl-push-group")
    assert all(mine == top for mine, top in committed.values()), committed  # kept by the broker
    assert sum(top for _, top in committed.values()) == 15

    more = run(PRODUCER, tmp_path, namesrv, topic, "6", str(tmp_path / "unused"))
    assert len(more.words("OK")) == 6
    second = run(PUSH_CONSUMER, tmp_path, namesrv, topic, "mqctl-push-group", "tagA", "6")
    # the group resumes where it stopped: none of the first run's messages, only the new ones with tagA
    # (the new run's keys repeat seq-0..5, and its batch adds batch-0..2, all tagA)
    assert {w[0] for w in second.words("MSG")} == {"seq-0", "seq-2", "seq-4", "batch-0", "batch-1", "batch-2"}, \
        second.describe()
    assert all(w[1] == "tagA" for w in second.words("MSG"))


def test_cpp_producer_reroutes_across_a_master_sigkill(cpp_client: None, controllers: ControllerCluster,
                                                       brokers: list[BrokerNode], tmp_path: Path) -> None:
    group = [make_broker(tmp_path, "broker-a", i, controllers.addresses, **HA) for i in (1, 2, 3)]
    brokers.extend(group)
    group[0].start()
    wait_role(group[0], "MASTER")
    for node in group[1:]:
        node.start()
    poll(lambda: len(sync_state(controllers, "broker-a")["inSyncReplicas"]) == 3, 60, "all three replicas in sync")
    namesrv, topic, stop = controllers.addresses, "FailoverClientTopic", tmp_path / "stop-producing"

    producer = Client(PRODUCER, [namesrv, topic, "-1", str(stop)], tmp_path)
    try:
        poll(lambda: len(producer.words("OK")) >= 30, 60, "30 acknowledged sends before the kill")
        master_address = sync_state(controllers, "broker-a")["masterAddress"]
        master = next(n for n in group if n.address == master_address)
        master.kill()
        killed_at = max(int(w[0]) for w in producer.words("OK") + producer.words("FAIL"))
        poll(lambda: len([w for w in producer.words("OK") if int(w[0]) > killed_at]) >= 20, 90,
             "20 acknowledged sends to the new master")
        stop.touch()
        producer.wait()
    finally:
        producer.kill()
    acked = {f"seq-{w[0]}" for w in producer.words("OK")}
    new_master = sync_state(controllers, "broker-a")["masterAddress"]
    assert new_master != master_address

    pulled = run(PULL_CONSUMER, tmp_path, namesrv, topic)
    consumed = {w[2] for w in pulled.words("MSG")}
    assert not acked - consumed, f"acknowledged but lost: {sorted(acked - consumed)[:20]}"
    assert len(acked) >= 50
