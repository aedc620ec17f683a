"""Request-id de-duplication memory is bounded (issue 19, item 12): at most REQUEST_IDS_MAX ids, none
longer than the API accepts, whatever the Raft log or an old snapshot holds; dedup itself still works
for an over-long id."""

from __future__ import annotations

from services.controller.state_machine import REQUEST_ID_KEPT_LENGTH, REQUEST_IDS_MAX, ReplicasInfoManager


def kept_bytes(m: ReplicasInfoManager) -> int:
    return sum(len(r) for r in m.applied_requests)


def test_a_megabyte_request_id_is_kept_as_a_digest() -> None:
    m = ReplicasInfoManager()
    huge = "r" * 2**20
    m.remember_request(huge)
    assert m.seen_request(huge)
    assert not m.seen_request(huge[:-1] + "s")
    assert kept_bytes(m) <= REQUEST_ID_KEPT_LENGTH


def test_ten_thousand_long_ids_stay_small() -> None:
    """What applying log entries that carry such ids does (raft._apply_entry remembers each one)."""
    m = ReplicasInfoManager()
    for i in range(REQUEST_IDS_MAX + 50):
        m.remember_request(f"{i:08d}" + "x" * 4096)
    assert len(m.applied_requests) == REQUEST_IDS_MAX
    assert kept_bytes(m) <= REQUEST_IDS_MAX * REQUEST_ID_KEPT_LENGTH
    # The newest are the ones kept, and a retry of one of them is still recognised.
    assert m.seen_request(f"{REQUEST_IDS_MAX + 49:08d}" + "x" * 4096)
    assert not m.seen_request(f"{0:08d}" + "x" * 4096)


def test_an_old_snapshot_with_huge_ids_loads_bounded_and_replicas_agree() -> None:
    state = ReplicasInfoManager().to_dict()
    state["appliedRequests"] = ["short-id"] + ["y" * 2000 + str(i) for i in range(REQUEST_IDS_MAX + 5)]
    a, b = ReplicasInfoManager(), ReplicasInfoManager()
    a.load_dict(state)
    b.load_dict(dict(state))
    assert len(a.applied_requests) == REQUEST_IDS_MAX
    assert kept_bytes(a) <= REQUEST_IDS_MAX * REQUEST_ID_KEPT_LENGTH
    assert a.to_dict() == b.to_dict()
    assert a.seen_request("y" * 2000 + str(REQUEST_IDS_MAX + 4))


def test_ordinary_ids_are_kept_as_they_are() -> None:
    m = ReplicasInfoManager()
    m.remember_request("b-a-1-apply")
    m.remember_request("z" * REQUEST_ID_KEPT_LENGTH)
    assert list(m.applied_requests) == ["b-a-1-apply", "z" * REQUEST_ID_KEPT_LENGTH]
