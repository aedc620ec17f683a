"""A second RocketMQ client nobody here wrote: ``ali-ons`` from npm, a pure-JavaScript implementation of
RocketMQ's remoting protocol (its own frame codec, JSON headers, route and pull logic), run by Node with our
controllers as its name server.

Its ``Producer`` looks the topic's route up (GET_ROUTEINFO_BY_TOPIC) and sends messages with keys and tags
(SEND_MESSAGE_V2); its ``Consumer`` (a push consumer built on PULL_MESSAGE with long polling) joins a group
through client heartbeats, rebalances the queues, receives only the tag it subscribed to, commits its
offsets to the broker, and subscribes to its group's retry topic (``%RETRY%<group>``), which the broker
creates on the group's first heartbeat as RocketMQ's does. ali-ons does not create topics on first send
(it needs an existing route), so the topic is made with ``mqctl updateTopic`` first.

The client is installed by the test setup from the npm registry (pinned versions) into a cache directory;
without Node and npm on the machine the test is skipped, saying so (the C++ client of test_real_client.py is
the one every run needs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.common.codes import ResponseCode
from services.remoting import broker_headers as bh
from services.remoting.command import RequestCode, make_request
from services.remoting.headers import GetRouteInfoRequestHeader
from tests.integration.conftest import run_cli
from tests.integration.test_broker import FAST_BROKER, wait_role
from tests.support.remoting import ask

pytestmark = pytest.mark.integration

PACKAGES = ("ali-ons@3.12.0", "urllib@2.44.1")
CACHE = Path(os.environ.get("MQCTL_TEST_CACHE", Path.home() / ".cache" / "mqctl-tests")) / "js-ali-ons-3.12.0"

SCRIPT = r"""
'use strict';
const httpclient = require('urllib');
const { Producer, Consumer, Message } = require('ali-ons');
const [nameSrv, topic, group, count] = [process.argv[2], process.argv[3], process.argv[4], Number(process.argv[5])];
const say = (what) => console.log(JSON.stringify(what));
(async () => {
  const producer = new Producer({ httpclient, nameSrv, producerGroup: group + '-producer', accessKeyId: 'none',
                                  accessKeySecret: 'none' });
  await producer.ready();
  for (let i = 0; i < count; i++) {
    const message = new Message(topic, i % 2 === 0 ? 'tagA' : 'tagB', 'js body ' + i);
    message.keys = ['js-key-' + i];
    const result = await producer.send(message);
    say({ sent: i, status: result.sendStatus, msgId: result.msgId, queueId: result.messageQueue.queueId });
  }
  const consumer = new Consumer({ httpclient, nameSrv, consumerGroup: group, accessKeyId: 'none',
                                  accessKeySecret: 'none', consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
                                  persistConsumerOffsetInterval: 500 });
  const wanted = Math.ceil(count / 2);
  let got = 0;
  consumer.subscribe(topic, 'tagA', async (msg) => {
    got += 1;
    say({ got: msg.body.toString(), tags: msg.tags, keys: msg.keys, queueOffset: msg.queueOffset });
    if (got >= wanted) {
      setTimeout(async () => { await consumer.close(); await producer.close(); say({ done: got }); process.exit(0); },
                 1500);  // the offsets are committed every 500 ms, and on close
    }
  });
  consumer.on('error', (err) => say({ consumerError: String(err.message) }));
  setTimeout(() => { say({ timeout: got }); process.exit(3); }, 60000);
})().catch((err) => { say({ error: String(err && err.stack || err) }); process.exit(2); });
"""


@pytest.fixture(scope="module")
def js_client() -> Path:
    """The client's node_modules, installed once per machine (a failed install is a skip: the registry)."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.skip("Node.js and npm are not installed: the JavaScript client (ali-ons) cannot run here")
    marker = CACHE / "installed"
    if not marker.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        (CACHE / "package.json").write_text('{"name": "mqctl-js-client-test", "private": true}\n')
        result = subprocess.run([npm, "install", "--no-audit", "--no-fund", *PACKAGES], cwd=CACHE,
                                capture_output=True, text=True, timeout=300, check=False)
        if result.returncode != 0:
            why = f"npm install {' '.join(PACKAGES)} failed: {result.stderr.strip()[-500:]}"
            if os.environ.get("CI"):
                pytest.fail(why)  # CI has Node, npm and the registry: a failed install is a failure there
            pytest.skip(why)
        marker.write_text(" ".join(PACKAGES) + "\n")
    (CACHE / "client.js").write_text(SCRIPT)
    return CACHE


def run_js(client: Path, *args: str, home: Path) -> list[dict]:
    env = {**os.environ, "HOME": str(home)}  # ali-ons keeps local offsets and logs under $HOME
    result = subprocess.run(["node", str(client / "client.js"), *args], cwd=client, capture_output=True,
                            text=True, timeout=120, env=env, check=False)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert result.returncode == 0, f"exit {result.returncode}: {lines}\n{result.stderr[-3000:]}"
    return lines


@pytest.fixture
def broker(tmp_path: Path, controllers: ControllerCluster) -> Iterator[BrokerNode]:
    node = make_broker(tmp_path, "broker-a", 1, controllers.addresses, **FAST_BROKER)
    node.start()
    try:
        wait_role(node, "MASTER")
        yield node
    finally:
        node.kill()


def test_the_js_client_sends_and_consumes_through_our_controllers(js_client: Path, controllers: ControllerCluster,
                                                                  broker: BrokerNode, tmp_path: Path) -> None:
    created = run_cli("updateTopic", "-t", "JsTopic", "-c", "DefaultCluster", "-a", controllers.addresses)
    assert created.returncode == 0, created.stderr
    name_server = controllers.nodes[0].address  # any controller serves routes
    out = run_js(js_client, name_server, "JsTopic", "js-group", "10", home=tmp_path)
    sent = [line for line in out if "sent" in line]
    assert [line["status"] for line in sent] == ["SEND_OK"] * 10
    assert len({line["msgId"] for line in sent}) == 10
    got = [line for line in out if "got" in line]
    assert sorted(line["got"] for line in got) == [f"js body {i}" for i in range(0, 10, 2)]
    assert {line["tags"] for line in got} == {"tagA"}  # the subscription's tag only
    assert sorted(line["keys"] for line in got) == sorted(f"js-key-{i}" for i in range(0, 10, 2))
    # ali-ons looks its group's retry topic up before its first heartbeat has made the broker create it (as
    # against RocketMQ's broker): that first lookup may fail; nothing else may, and the route exists now
    errors = [line for line in out if "consumerError" in line or "error" in line]
    assert all("%RETRY%js-group" in str(line) for line in errors), errors
    route = ask(name_server, make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, 0,
                                          GetRouteInfoRequestHeader(topic="%RETRY%js-group").to_ext_fields()))
    assert route.code == ResponseCode.SUCCESS, route.remark
    # the group committed its offsets to the broker: in every queue, past every message (tagB ones included)
    for queue in range(4):
        assert committed(broker.address, "js-group", "JsTopic", queue) == max_offset(broker.address, "JsTopic", queue)


def committed(address: str, group: str, topic: str, queue: int) -> int | None:
    header = bh.QueryConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=queue,
                                                 set_zero_if_not_found=False)
    answer = ask(address, make_request(RequestCode.QUERY_CONSUMER_OFFSET, 0, header.to_ext_fields()))
    if answer.code != ResponseCode.SUCCESS:
        return None
    return bh.QueryConsumerOffsetResponseHeader.from_ext_fields(answer.ext_fields).offset


def max_offset(address: str, topic: str, queue: int) -> int:
    answer = ask(address, make_request(RequestCode.GET_MAX_OFFSET, 0, {"topic": topic, "queueId": str(queue)}))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return int(answer.ext_fields["offset"])
