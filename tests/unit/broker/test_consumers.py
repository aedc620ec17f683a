"""The consumer groups a broker learns from heartbeats (services/broker/consumers.py), with a fake clock."""

from __future__ import annotations

import pytest

from services.broker import consumers
from services.broker.consumers import CLIENT_EXPIRY_MS, ConsumerGroups, RegistryFull


def test_register_reports_membership_changes_only() -> None:
    groups = ConsumerGroups()
    assert groups.register("cg", "c1", "conn-1", {"T": "*"}, 0)
    assert not groups.register("cg", "c1", "conn-1", {"T": "*"}, 1000)  # a repeated heartbeat
    assert groups.register("cg", "c1", "conn-2", {"T": "*"}, 2000)      # the same client, reconnected
    assert groups.register("cg", "c0", "conn-3", {}, 2000)
    assert groups.client_ids("cg") == ["c0", "c1"] and groups.client_ids("none") == []
    assert sorted(groups.channels("cg")) == ["conn-2", "conn-3"]


def test_clients_leave_by_unregistering_closing_or_expiring() -> None:
    groups = ConsumerGroups()
    groups.register("a", "c1", "conn-1", {}, 0)
    groups.register("b", "c1", "conn-1", {}, 0)
    groups.register("b", "c2", "conn-2", {}, 0)
    groups.register("c", "c3", "conn-3", {}, 0)
    assert groups.channel_closed("conn-1") == ["a", "b"]
    assert groups.groups() == ["b", "c"]
    assert groups.unregister("b", "c2") and not groups.unregister("b", "c2")
    groups.register("c", "c4", "conn-4", {}, CLIENT_EXPIRY_MS)
    assert groups.expire(CLIENT_EXPIRY_MS) == []
    assert groups.expire(CLIENT_EXPIRY_MS + 1) == ["c"]  # c3 unheard for longer than the expiry
    assert groups.client_ids("c") == ["c4"]


def test_the_subscription_of_the_most_recently_heard_client_serves_pulls() -> None:
    groups = ConsumerGroups()
    groups.register("cg", "old", "conn-1", {"T": "tagA"}, 0)
    groups.register("cg", "new", "conn-2", {"T": "tagA || tagB", "U": "*"}, 10)
    assert groups.subscription("cg", "T") == "tagA || tagB"
    assert groups.subscription("cg", "U") == "*"
    assert groups.subscription("cg", "V") is None and groups.subscription("none", "T") is None


def test_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consumers, "MAX_GROUPS", 2)
    monkeypatch.setattr(consumers, "MAX_CLIENTS", 2)
    groups = ConsumerGroups()
    groups.register("g1", "c1", 1, {}, 0)
    groups.register("g1", "c2", 2, {}, 0)
    groups.register("g2", "c1", 1, {}, 0)
    with pytest.raises(RegistryFull, match="already has 2 clients"):
        groups.register("g1", "c3", 3, {}, 0)
    with pytest.raises(RegistryFull, match="already knows 2 consumer groups"):
        groups.register("g3", "c1", 1, {}, 0)
    assert not groups.register("g1", "c2", 2, {}, 5)  # a known client is still heard


def test_registrations_and_subscription_characters_are_bounded_in_all_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consumers, "MAX_REGISTRATIONS", 3)
    monkeypatch.setattr(consumers, "MAX_SUBSCRIPTION_CHARS", 20)
    groups = ConsumerGroups()
    groups.register("g1", "c1", 1, {"T": "a"}, 0)
    groups.register("g2", "c1", 1, {"T": "a"}, 0)
    groups.register("g3", "c1", 1, {}, 0)
    with pytest.raises(RegistryFull, match="already knows 3 consumer clients"):
        groups.register("g4", "c1", 1, {}, 0)
    groups.unregister("g3", "c1")  # room again
    groups.register("g4", "c1", 1, {"T": "x" * 10}, 0)  # 2 + 2 + 11 characters kept
    with pytest.raises(RegistryFull, match="would pass 20 characters"):
        groups.register("g1", "c1", 1, {"T": "y" * 7}, 0)
    groups.register("g1", "c1", 1, {"T": "y" * 6}, 0)  # c1's old 2 characters in g1 are freed: 20 in all
    assert groups.channel_closed(1) == ["g1", "g2", "g4"]
    groups.register("g5", "c9", 2, {"T": "z" * 18}, 0)  # everything was freed with the connection
