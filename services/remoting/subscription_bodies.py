"""Subscription groups on the wire: RocketMQ's SubscriptionGroupConfig (the body of
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, 200) and the SubscriptionGroupWrapper that GET_ALL_SUBSCRIPTIONGROUP_CONFIG
(201) answers (``subscriptionGroupTable``, ``forbiddenTable``, ``dataVersion``), as fastjson writes them: every
field, names sorted, a null one left out. Every field read is checked and bounded (a name's length, the
table's size, a retry policy's list); the defaults are RocketMQ's."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from services.remoting.bodies import Body, _Obj
from services.remoting.errors import BodyError
from services.remoting.namesrv_bodies import DataVersion

__all__ = ["GROUP_PATTERN", "MAX_GROUPS", "ExponentialRetryPolicy", "GroupRetryPolicy", "SimpleSubscription",
           "SubscriptionGroupConfig", "SubscriptionGroupWrapper"]

#: A group name as RocketMQ's TopicValidator accepts one for a group: 1-255 of these characters.
GROUP_PATTERN = re.compile(r"[%|a-zA-Z0-9_-]{1,255}")
#: The most groups one broker keeps (RocketMQ has no bound; one keeps the file and its copies small).
MAX_GROUPS = 10_000
#: The most entries of a customized retry policy, of a group's subscriptions and of its attributes.
MAX_ITEMS = 256
#: RocketMQ's CustomizedRetryPolicy default: the waits (ms) of the 18 delay levels after the first two.
DEFAULT_NEXT = (1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000, 420000, 480000, 540000,
                600000, 1200000, 1800000, 3600000, 7200000)
RETRY_TYPES = ("CUSTOMIZED", "EXPONENTIAL")


def _text(obj: _Obj, key: str, limit: int = 255) -> str | None:
    value = obj.string(key)
    if value is not None and len(value) > limit:
        raise BodyError(f"{obj.at(key)} is longer than {limit} characters")
    return value


def _bounded(entries: list[Any], path: str) -> list[Any]:
    if len(entries) > MAX_ITEMS:
        raise BodyError(f"{path} has more than {MAX_ITEMS} entries")
    return entries


@dataclass(frozen=True)
class ExponentialRetryPolicy(Body):
    initial: int = 5000
    max: int = 7_200_000
    multiplier: int = 2

    def to_json(self) -> dict[str, Any]:
        return {"initial": self.initial, "max": self.max, "multiplier": self.multiplier}

    @classmethod
    def read(cls, obj: _Obj) -> ExponentialRetryPolicy:
        initial, most, multiplier = (obj.integer(k, "int64", d) for k, d in (
            ("initial", 5000), ("max", 7_200_000), ("multiplier", 2)))
        return cls(initial or 0, most or 0, multiplier or 0)

    def describe(self) -> str:
        return f"ExponentialRetryPolicy{{initial={self.initial}, max={self.max}, multiplier={self.multiplier}}}"


@dataclass(frozen=True)
class GroupRetryPolicy(Body):
    """``type`` CUSTOMIZED (the delay levels' waits, ``next``) or EXPONENTIAL; a policy absent is null."""

    type: str = "CUSTOMIZED"
    exponential: ExponentialRetryPolicy | None = None
    customized_next: tuple[int, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.exponential is not None:
            out["exponentialRetryPolicy"] = self.exponential.to_json()
        if self.customized_next is not None:
            out["customizedRetryPolicy"] = {"next": list(self.customized_next)}
        return out

    @classmethod
    def read(cls, obj: _Obj) -> GroupRetryPolicy:
        kind = obj.string("type") or "CUSTOMIZED"
        if kind not in RETRY_TYPES:
            raise BodyError(f"{obj.at('type')} is {kind[:40]!r}, not one of {', '.join(RETRY_TYPES)}")
        exponential = obj.data.get("exponentialRetryPolicy")
        customized = obj.data.get("customizedRetryPolicy")
        nexts: tuple[int, ...] | None = None
        if customized is not None:
            inner = _Obj(customized, obj.at("customizedRetryPolicy"))
            items = _bounded(inner.items("next"), inner.at("next"))
            nexts = tuple(_Obj({"v": v}, p).integer("v", "int64") or 0 for p, v in items)
        return cls(kind, None if exponential is None else
                   ExponentialRetryPolicy.read(_Obj(exponential, obj.at("exponentialRetryPolicy"))), nexts)

    def describe(self) -> str:
        exponential = "null" if self.exponential is None else self.exponential.describe()
        customized = "null" if self.customized_next is None else \
            f"CustomizedRetryPolicy{{next=[{', '.join(str(n) for n in self.customized_next)}]}}"
        return (f"GroupRetryPolicy{{type={self.type}, exponentialRetryPolicy={exponential}, "
                f"customizedRetryPolicy={customized}}}")


@dataclass(frozen=True)
class SimpleSubscription(Body):
    """SimpleSubscriptionData: a topic the group is meant to subscribe to, with its filter."""

    topic: str
    expression_type: str | None = None
    expression: str | None = None
    version: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"topic": self.topic, "version": self.version}
        if self.expression_type is not None:
            out["expressionType"] = self.expression_type
        if self.expression is not None:
            out["expression"] = self.expression
        return out

    @classmethod
    def read(cls, obj: _Obj) -> SimpleSubscription:
        topic = _text(obj, "topic", 127)
        if not topic:
            raise BodyError(f"{obj.at('topic')} is missing")
        return cls(topic, _text(obj, "expressionType", 16), _text(obj, "expression", 4096),
                   obj.integer("version", "int64", 0) or 0)


@dataclass(frozen=True)
class SubscriptionGroupConfig(Body):
    """One consumer group's settings on a broker (RocketMQ's defaults)."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    group_retry_policy: GroupRetryPolicy = field(default_factory=GroupRetryPolicy)
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    subscription_data_set: tuple[SimpleSubscription, ...] | None = None
    attributes: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "groupName": self.group_name, "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeMessageOrderly": self.consume_message_orderly, "retryQueueNums": self.retry_queue_nums,
            "retryMaxTimes": self.retry_max_times, "groupRetryPolicy": self.group_retry_policy.to_json(),
            "brokerId": self.broker_id, "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "groupSysFlag": self.group_sys_flag, "consumeTimeoutMinute": self.consume_timeout_minute,
            "attributes": dict(self.attributes)}
        if self.subscription_data_set is not None:
            out["subscriptionDataSet"] = [s.to_json() for s in self.subscription_data_set]
        return out

    @classmethod
    def read(cls, obj: _Obj) -> SubscriptionGroupConfig:
        name = _text(obj, "groupName") or ""
        if GROUP_PATTERN.fullmatch(name) is None:
            raise BodyError(f"{obj.at('groupName')} {name[:80]!r} is no group name: use 1-255 of letters, digits, "
                            f"'%', '|', '_' and '-'")
        flags = {k: bool(obj.boolean(k, d)) for k, d in (
            ("consumeEnable", True), ("consumeFromMinEnable", True), ("consumeBroadcastEnable", True),
            ("consumeMessageOrderly", False), ("notifyConsumerIdsChangedEnable", True))}
        ints = {k: obj.integer(k, "int32", d) or 0 for k, d in (
            ("retryQueueNums", 1), ("retryMaxTimes", 16), ("groupSysFlag", 0), ("consumeTimeoutMinute", 15))}
        longs = {k: obj.integer(k, "int64", d) or 0 for k, d in (("brokerId", 0), ("whichBrokerWhenConsumeSlowly", 1))}
        policy = obj.data.get("groupRetryPolicy")
        subs = obj.data.get("subscriptionDataSet")
        attributes = {}
        for key, path, value in _bounded(obj.entries("attributes"), obj.at("attributes")):
            if not isinstance(key, str) or not isinstance(value, str) or len(key) > 255 or len(value) > 4096:
                raise BodyError(f"{path} is not a short string attribute")
            attributes[key] = value
        return cls(name, flags["consumeEnable"], flags["consumeFromMinEnable"], flags["consumeBroadcastEnable"],
                   flags["consumeMessageOrderly"], ints["retryQueueNums"], ints["retryMaxTimes"],
                   GroupRetryPolicy() if policy is None else GroupRetryPolicy.read(_Obj(policy, obj.at("groupRetryPolicy"))),
                   longs["brokerId"], longs["whichBrokerWhenConsumeSlowly"], flags["notifyConsumerIdsChangedEnable"],
                   ints["groupSysFlag"], ints["consumeTimeoutMinute"],
                   None if subs is None else tuple(SimpleSubscription.read(_Obj(v, p)) for p, v in
                                                   _bounded(obj.items("subscriptionDataSet"), obj.at("subscriptionDataSet"))),
                   attributes)

    def describe(self) -> str:
        """``SubscriptionGroupConfig.toString`` (Guava's toStringHelper), which mqadmin's updateSubGroup prints."""
        subs = "null" if self.subscription_data_set is None else "[" + ", ".join(
            f"SimpleSubscriptionData{{topic={s.topic}, expressionType={s.expression_type}, "
            f"expression={s.expression}, version={s.version}}}" for s in self.subscription_data_set) + "]"
        attributes = "{" + ", ".join(f"{k}={v}" for k, v in self.attributes.items()) + "}"
        java = {True: "true", False: "false"}
        return (f"SubscriptionGroupConfig{{groupName={self.group_name}, consumeEnable={java[self.consume_enable]}, "
                f"consumeFromMinEnable={java[self.consume_from_min_enable]}, "
                f"consumeBroadcastEnable={java[self.consume_broadcast_enable]}, "
                f"consumeMessageOrderly={java[self.consume_message_orderly]}, retryQueueNums={self.retry_queue_nums}, "
                f"retryMaxTimes={self.retry_max_times}, groupRetryPolicy={self.group_retry_policy.describe()}, "
                f"brokerId={self.broker_id}, whichBrokerWhenConsumeSlowly={self.which_broker_when_consume_slowly}, "
                f"notifyConsumerIdsChangedEnable={java[self.notify_consumer_ids_changed_enable]}, "
                f"groupSysFlag={self.group_sys_flag}, consumeTimeoutMinute={self.consume_timeout_minute}, "
                f"subscriptionDataSet={subs}, attributes={attributes}}}")


@dataclass(frozen=True)
class SubscriptionGroupWrapper(Body):
    """The broker's groups by name, its forbidden table (kept empty: no group is forbidden here) and the
    table's DataVersion, bumped at every change."""

    table: Mapping[str, SubscriptionGroupConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json(self) -> dict[str, Any]:
        return {"subscriptionGroupTable": {n: c.to_json() for n, c in self.table.items()},
                "forbiddenTable": {}, "dataVersion": self.data_version.to_json()}

    @classmethod
    def read(cls, obj: _Obj) -> SubscriptionGroupWrapper:
        entries = obj.entries("subscriptionGroupTable")
        if len(entries) > MAX_GROUPS:
            raise BodyError(f"{obj.at('subscriptionGroupTable')} has more than {MAX_GROUPS} groups")
        table = {}
        for name, path, value in entries:
            config = SubscriptionGroupConfig.read(_Obj(value, path))
            if config.group_name != name:
                raise BodyError(f"{path} holds the group {config.group_name!r}")
            table[config.group_name] = config
        version = obj.data.get("dataVersion")
        return cls(table, DataVersion() if version is None else DataVersion.read(_Obj(version, obj.at("dataVersion"))))
