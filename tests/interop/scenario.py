"""One scripted scenario of admin commands, run on RocketMQ's cluster by real mqadmin and by mqctl, and on
ours by real mqadmin, each step in the same state on both sides.

Each step names mqadmin's arguments (a function of the side: its addresses) and who runs it on RocketMQ's
side: ``both`` tools at once (reads, and writes that leave the same state however often they run), or
``mqadmin`` or ``mqctl`` alone (writes that change the state: an election one way with one tool and back
with the other). On our side real mqadmin runs every step, once for each tool that ran it on RocketMQ's,
so that both clusters go through the same writes. ``prepare`` brings a side to the state the step needs
first (a full SyncStateSet before an election, a registered broker id to clean); what it learns (an id,
the state before) goes into the side's context.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from services.common.codes import ResponseCode
from services.common.remoting_client import RemotingClient
from services.remoting.command import RequestCode, make_request
from tests.interop.admin_sides import CLUSTER, GROUP, Side, mqctl, succeeded
from tests.interop.phantom import register_phantom

TOPIC, TOPIC_BY_ADDRESS, TOPIC_WITH_OPTIONS = "ScenarioTopic", "ScenarioTopicOnMaster", "ScenarioTopicWithOptions"
#: The body, keys and tag of both messages the scenario sends, and the queue it sends them to.
BODY, KEYS, TAG, QUEUE = "hello scenario", "key1", "tagA", "1"
#: A controller property both controllers may change at run time (the kit sets it to 2000).
CONFIG_KEY, CONFIG_VALUE, CONFIG_BACK = "scanNotActiveBrokerInterval", "3000", "2000"
#: What resetMasterFlushOffset sets on broker 2 (then shown by haStatus as its #MasterFlushOffset).
FLUSH_OFFSET = "64"

Args = Callable[[Side, dict[str, Any]], tuple[str, ...]]

#: mqadmin on fastjson2 (5.4.0 on; seen with 5.5.0) cannot read the answer to an election (1002), whose broker ids are
#: bare map keys as RocketMQ's controllers write them (fastjson's form; ours write the same bytes): the
#: election is made, then mqadmin prints the decoder's exception (as apache/rocketmq#10284 for another
#: body). Where a step is expected to fail so, what mqadmin printed is its stdout and then this line.
UNREADABLE_ELECTION = "JSONException: not support unquoted name"
FAILED = "mqadmin failed: "
#: The pauses before asking a failed mqadmin question again: its 3 s RPC timeout runs out when a burst of
#: JVMs starts on the two cores (another worker's cluster, three mqadmin at once); asked again at once, it
#: meets the same burst.
RETRY_PAUSES_S = (3.0, 8.0, 15.0)


def _fails_from_5_4(version: str) -> str | None:
    major_minor = tuple(int(part) for part in version.split(".")[:2])
    return UNREADABLE_ELECTION if major_minor >= (5, 4) else None


def _never(version: str) -> str | None:
    return None


def _nothing(side: Side, ctx: dict[str, Any]) -> None:
    return None


@dataclass(frozen=True)
class Step:
    name: str
    tool: str  # "both", "mqadmin" or "mqctl": who runs it on RocketMQ's side
    args: Args  # mqadmin's arguments
    mqctl_args: Args | None = None  # mqctl's, where they are not mqadmin's (it always adds --format mqadmin)
    prepare: Callable[[Side, dict[str, Any]], None] = _nothing
    #: Also run on our side (a step where ours differed by design would not be).
    ours: bool = True
    #: What mqadmin of a version is expected to fail with (a text of the cause it prints), if it does.
    mqadmin_fails: Callable[[str], str | None] = _never


def _steady(side: Side, ctx: dict[str, Any]) -> None:
    ctx["before"] = side.steady()


def _joined(broker_id: int) -> Callable[[Side, dict[str, Any]], None]:
    """Broker ``broker_id`` back in the SyncStateSet: what an election of it needs. Not every replica: after
    an election RocketMQ's slaves rejoin the new master at different times (one may first follow the old
    master's HA address, learnt late), and the election needs only its candidate."""
    def prepare(side: Side, ctx: dict[str, Any]) -> None:
        ctx["before"] = side.in_sync(broker_id)
    return prepare


def _phantom(key: str) -> Callable[[Side, dict[str, Any]], None]:
    """A broker id registered with the controllers whose broker never runs (a stopped, removed one)."""
    def prepare(side: Side, ctx: dict[str, Any]) -> None:
        ctx[key] = register_phantom(side.leader(), CLUSTER, GROUP, f"127.0.0.1:{1 + len(ctx.get('phantoms', []))}")
        ctx.setdefault("phantoms", []).append(ctx[key])
    return prepare


def _elect(target: int) -> Args:
    return lambda s, c: ("electMaster", "-a", s.follower(), "-c", CLUSTER, "-bn", GROUP, "-b", str(target))


def _clean(key: str) -> Args:
    return lambda s, c: ("cleanBrokerMetadata", "-a", s.follower(), "-bn", GROUP, "-c", CLUSTER, "-b", str(c[key]))


def _update_config(value: str) -> Args:
    return lambda s, c: ("updateControllerConfig", "-a", s.controller_addrs, "-k", CONFIG_KEY, "-v", value)


def _send(s: Side, c: dict[str, Any]) -> tuple[str, ...]:
    return ("sendMessage", "-t", TOPIC, "-p", BODY, "-k", KEYS, "-c", TAG, "-b", GROUP, "-i", QUEUE)


def _send_mqctl(s: Side, c: dict[str, Any]) -> tuple[str, ...]:
    """mqctl's -c is a cluster (mqadmin's -c is the tag), so the tag goes with --tags."""
    return ("sendMessage", "-a", s.controller_addrs, "-t", TOPIC, "-p", BODY, "-k", KEYS, "--tags", TAG, "-b", GROUP,
            "-i", QUEUE)


def _with_namesrv(args: Args) -> Args:
    """mqctl finds brokers through the controller unless given a name server (mqadmin always uses one)."""
    return lambda s, c: (*args(s, c), "-n", s.namesrv)


def _query_by_key(s: Side, c: dict[str, Any]) -> tuple[str, ...]:
    return ("queryMsgByKey", "-t", TOPIC, "-k", KEYS)


def _create_topic(s: Side, c: dict[str, Any]) -> tuple[str, ...]:
    return ("updateTopic", "-c", CLUSTER, "-t", TOPIC)


STEPS: tuple[Step, ...] = (
    Step("updateTopic -c", "both", _create_topic, _with_namesrv(_create_topic)),
    Step("updateTopic -b", "both", lambda s, c: ("updateTopic", "-b", str(s.sync_state().master_address), "-t",
                                                 TOPIC_BY_ADDRESS, "-r", "8", "-w", "8", "-p", "6", "-o", "false")),
    Step("updateTopic with its options", "both", lambda s, c: (
        "updateTopic", "-b", str(s.sync_state().master_address), "-t", TOPIC_WITH_OPTIONS, "-r", "4", "-w", "2", "-p",
        "4")),
    Step("sendMessage by mqadmin", "mqadmin", _send),
    Step("sendMessage by mqctl", "mqctl", _send, _send_mqctl),
    Step("consumeMessage -g", "both", lambda s, c: ("consumeMessage", "-t", TOPIC, "-b", GROUP, "-g", "GroupOfMqadmin"),
         lambda s, c: ("consumeMessage", "-a", s.controller_addrs, "-t", TOPIC, "-b", GROUP, "-g", "GroupOfMqctl")),
    Step("consumeMessage -i -o", "both", lambda s, c: ("consumeMessage", "-t", TOPIC, "-b", GROUP, "-i", QUEUE, "-o", "1"),
         lambda s, c: ("consumeMessage", "-a", s.controller_addrs, "-t", TOPIC, "-b", GROUP, "-i", QUEUE, "-o", "1")),
    # mqadmin's -c is the number of messages, mqctl's -n (its -c is a cluster, as in its other commands)
    Step("consumeMessage -i -c", "both", lambda s, c: ("consumeMessage", "-t", TOPIC, "-b", GROUP, "-i", QUEUE, "-c", "1"),
         lambda s, c: ("consumeMessage", "-a", s.controller_addrs, "-t", TOPIC, "-b", GROUP, "-i", QUEUE, "-n", "1")),
    # the index of keys: both messages sent above carry KEYS, on the master that stored them
    Step("queryMsgByKey", "both", _query_by_key, _with_namesrv(_query_by_key)),
    Step("resetMasterFlushOffset", "both", lambda s, c: ("resetMasterFlushOffset", "-b", s.broker(2), "-o",
                                                         FLUSH_OFFSET)),
    Step("haStatus of the reset slave", "both", lambda s, c: ("haStatus", "-b", s.broker(2))),
    Step("getBrokerEpoch after the sends", "both", lambda s, c: ("getBrokerEpoch", "-b", GROUP),
         _with_namesrv(lambda s, c: ("getBrokerEpoch", "-b", GROUP))),
    Step("updateControllerConfig", "mqadmin", _update_config(CONFIG_VALUE)),
    Step("getControllerConfig after the update", "both", lambda s, c: ("getControllerConfig", "-a", s.controller_addrs)),
    Step("updateControllerConfig back", "mqctl", _update_config(CONFIG_BACK)),
    Step("cleanBrokerMetadata by mqadmin", "mqadmin", _clean("phantom A"), prepare=_phantom("phantom A")),
    Step("cleanBrokerMetadata by mqctl", "mqctl", _clean("phantom B"), prepare=_phantom("phantom B")),
    Step("getSyncStateSet after the cleaning", "both", lambda s, c: ("getSyncStateSet", "-a", s.controller_addrs,
                                                                     "-b", GROUP), prepare=_steady),
    # Last: after an election a RocketMQ slave may follow the old master's HA address for a long time (it
    # learns the master's HA address from a name server that has not heard from the new master yet), so the
    # group may not be whole again afterwards.
    Step("electMaster to 2", "mqadmin", _elect(2), prepare=_steady, mqadmin_fails=_fails_from_5_4),
    # on the new master, which indexed them as a slave
    Step("queryMsgByKey on broker 2 as master", "both", _query_by_key, _with_namesrv(_query_by_key)),
    Step("electMaster back to 1", "mqctl", _elect(1), prepare=_joined(1), mqadmin_fails=_fails_from_5_4),
)

STEP = {step.name: step for step in STEPS}


@dataclass
class Transcript:
    """What each tool printed at each step on one side (``outputs[step][tool]``), and what the side's
    context held after each step's ``prepare`` (``contexts[step]``)."""

    side: Side
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    contexts: dict[str, dict[str, Any]] = field(default_factory=dict)


def run(side: Side, steps: tuple[Step, ...] = STEPS, with_mqctl: bool = True) -> Transcript:
    """Every step on one side: with mqctl where the step says (RocketMQ's side), or mqadmin alone."""
    transcript, ctx = Transcript(side), {}
    for step in steps:
        if not with_mqctl and not step.ours:
            continue
        step.prepare(side, ctx)
        transcript.contexts[step.name] = dict(ctx)
        args = step.args(side, ctx)
        mqctl_args = step.mqctl_args(side, ctx) if step.mqctl_args else args
        tools = ["mqadmin", "mqctl"] if step.tool == "both" else [step.tool]
        if not with_mqctl:
            transcript.outputs[step.name] = {"mqadmin": mqadmin_output(side, args, step.tool == "both",
                                                                       step.mqadmin_fails(side.version))}
            continue
        with ThreadPoolExecutor(2) as pool:
            runs = {tool: pool.submit(mqadmin_output, side, args, step.tool == "both", step.mqadmin_fails(side.version))
                    if tool == "mqadmin" else pool.submit(_mqctl, mqctl_args)
                    for tool in tools}
            transcript.outputs[step.name] = {tool: future.result() for tool, future in runs.items()}
    return transcript


def mqadmin_output(side: Side, args: tuple[str, ...], again: bool, fails: str | None = None) -> str:
    """mqadmin's output; a step that leaves the same state however often it runs (``both``) is asked again,
    three times at most (after RETRY_PAUSES_S), when mqadmin fails, as its RPC timeouts can run out on two busy
    cores. A step expected to fail (``fails``, a text of the cause) must fail so: its stdout, then the line
    naming the cause."""
    if fails is not None:
        done = side.mqadmin(*args)
        causes = [line for line in done.stderr.splitlines() if fails in line]
        assert done.returncode == 0 and causes, f"mqadmin {' '.join(args)} did not fail with {fails}: {done.stderr}"
        return done.stdout + FAILED + causes[0].removeprefix("Caused by: ") + "\n"
    for attempt in range(len(RETRY_PAUSES_S) if again else 0):
        done = side.mqadmin(*args)
        if done.returncode == 0 and "Exception" not in done.stderr:
            return done.stdout
        time.sleep(RETRY_PAUSES_S[attempt])  # a burst of JVMs starting elsewhere passes meanwhile
    if not again and args[0] == "sendMessage":
        return send_output(side, args)
    if not again and args[0] == "cleanBrokerMetadata":
        return clean_output(side, args)
    return succeeded("mqadmin", args, side.mqadmin(*args))


def clean_output(side: Side, args: tuple[str, ...]) -> str:
    """mqadmin's cleanBrokerMetadata: asked again (three times at most) only when it failed finding the
    controller leader (its first request, getControllerMetaData, timed out on two busy cores), so that the
    clean itself was never sent and asking again cannot make it fail as already done."""
    for _ in range(3):
        done = side.mqadmin(*args)
        if done.returncode == 0 and "Exception" not in done.stderr:
            return done.stdout
        if "MQClientAPIImpl.getControllerMetaData" not in done.stderr:
            break
    return succeeded("mqadmin", args, done)


def send_output(side: Side, args: tuple[str, ...]) -> str:
    """mqadmin's sendMessage to one queue (``-i``): tried three times at most, when it failed and the queue
    did not grow (nothing was stored: a timeout of its 3 s send on two busy cores, before the broker wrote
    anything), so that the message is stored once however often it was tried."""
    options = dict(zip(args[1::2], args[2::2], strict=False))
    if "-i" not in options:
        return succeeded("mqadmin", args, side.mqadmin(*args))
    topic, queue_id = options["-t"], int(options["-i"])
    for _ in range(3):
        before = max_offset(side, topic, queue_id)
        done = side.mqadmin(*args)
        if done.returncode == 0 and "Exception" not in done.stderr:
            return done.stdout
        time.sleep(1.0)  # a write the broker was still doing when mqadmin gave up lands before the check
        if max_offset(side, topic, queue_id) != before:
            break  # stored although mqadmin saw no answer: asking again would store it twice
    return succeeded("mqadmin", args, done)


def max_offset(side: Side, topic: str, queue_id: int) -> int:
    """The end of a queue on the side's master (GET_MAX_OFFSET)."""
    master = side.sync_state().master_address

    async def ask() -> int:
        client = RemotingClient(timeout_s=10.0)
        try:
            answer = await client.call(master, make_request(RequestCode.GET_MAX_OFFSET, 0, {
                "topic": topic, "queueId": str(queue_id)}))
            return int(answer.ext_fields.get("offset", "-1")) if answer.code == ResponseCode.SUCCESS else -1
        finally:
            await client.close()
    return asyncio.run(ask())


def _mqctl(args: tuple[str, ...]) -> str:
    return succeeded("mqctl", args, mqctl(*args, "--format", "mqadmin"))
