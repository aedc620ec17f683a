"""The chaos suite's verdict on its Java clients (tests/chaos/java_workload.py), from written histories: each
rule holds for a clean run and catches the one fault it is for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.chaos.java_workload import CONSUMERS, PRODUCERS, JavaWorkload
from tests.rocketmq.javaclients import JavaClients

T0 = 1_800_000_000_000


def sent(seq: int, at: int, queue: int = 0, offset: int = 0) -> str:
    return f"SENT\t{at}\t{seq}\tsync\tSEND_OK\tbroker-a\t{queue}\t{offset}\tID{seq}\t127.0.0.1:1\n"


def consumed(seq: int, at: int, queue: int = 0, offset: int = 0, born: int = T0) -> str:
    return (f"CONSUMED\t{at}\t{seq}\t{queue}\t{offset}\tTagA\tkey-{seq}\t9\t0\tbroker-a\t127.0.0.1:1\tID{seq}"
            f"\t{born}\n")


def workload(tmp_path: Path, **lines: str) -> JavaWorkload:
    """A workload whose clients wrote ``lines`` (by client name, dashes as underscores); the others wrote that
    they started, and nothing else."""
    found = JavaWorkload(JavaClients("5.3.3", cache=tmp_path), tmp_path, "127.0.0.1:1", 60)
    for name in (*CONSUMERS, *PRODUCERS, "transaction-producer"):
        found.files[name] = tmp_path / f"{name}.tsv"
        found.files[name].write_text(f"STARTED\t{T0}\tx\tV5_3_3\n" + lines.get(name.replace("-", "_"), ""))
    return found


def clean(tmp_path: Path) -> dict[str, str]:
    orderly_sent = "".join(sent(s, T0 + s, s % 4, s // 4) for s in range(8))
    orderly_read = "".join(consumed(s, T0 + 100 + s, s % 4, s // 4) for s in range(8))
    poison_sent = "".join(sent(s, T0 + s) for s in range(6))
    return {
        "orderly_producer": orderly_sent, "orderly_consumer": orderly_read,
        "delayed_producer": sent(1, T0), "delayed_consumer": consumed(1, T0 + 2000),
        "poison_producer": poison_sent,
        "poison_consumer": "".join(consumed(s, T0 + 10) for s in range(1, 5)),  # 0 and 5 are poisons
        "dlq_consumer": consumed(0, T0 + 9000) + consumed(5, T0 + 9000),
        # 0 commits, 1 rolls back, 2 is unknown and checked back, 3 commits
        "transaction_producer": "".join(sent(s, T0) for s in range(4)) + f"CHECKED\t{T0 + 6000}\t2\tCOMMIT_MESSAGE\tt\tID2\t0\n",
        "transaction_consumer": consumed(0, T0 + 5) + consumed(2, T0 + 6001) + consumed(3, T0 + 6),
    }


def problems(found: JavaWorkload, events: list[dict[str, Any]] | None = None) -> dict[str, list[str]]:
    return {k: v for k, v in found.verdict(events or []).items() if v}


def test_a_clean_run_has_no_violation(tmp_path: Path) -> None:
    assert problems(workload(tmp_path, **clean(tmp_path))) == {}


def test_an_acknowledged_message_no_consumer_read_is_lost(tmp_path: Path) -> None:
    lines = clean(tmp_path)
    lines["orderly_consumer"] = "".join(consumed(s, T0 + 100 + s, s % 4, s // 4) for s in range(7))
    lines["dlq_consumer"] = consumed(0, T0 + 9000)
    assert problems(workload(tmp_path, **lines)) == {"java: lost acknowledged (orderly)": ["7"],
                                                     "java: lost acknowledged (poison in the DLQ)": ["5"]}


def test_an_orderly_message_read_twice_within_an_epoch_is_a_violation_but_not_across_an_election(
        tmp_path: Path) -> None:
    lines = clean(tmp_path)
    lines["orderly_consumer"] += consumed(4, T0 + 500, 0, 1)
    found = problems(workload(tmp_path, **lines))
    assert list(found) == ["java: orderly consumer out of queue order within an epoch"]
    election = [{"eventType": "ELECT_MASTER", "elected": True, "timestamp": T0 + 300}]
    assert problems(workload(tmp_path, **lines), election) == {}


def test_a_delayed_message_consumed_before_due_is_a_violation(tmp_path: Path) -> None:
    lines = clean(tmp_path)
    lines["delayed_consumer"] = consumed(1, T0 + 1000)
    assert list(problems(workload(tmp_path, **lines))) == ["java: delayed message consumed before due"]


def test_a_delayed_copy_is_due_by_its_own_send_not_by_the_retry_that_was_acknowledged(tmp_path: Path) -> None:
    """A send that timed out was stored; its retry was acknowledged 1.8 s later: the first copy is consumed 0.3 s
    after that acknowledgement, 2.1 s after it was sent, and that is on time."""
    lines = clean(tmp_path)
    lines["delayed_producer"] = sent(1, T0 + 1800)
    lines["delayed_consumer"] = consumed(1, T0 + 2100, born=T0) + consumed(1, T0 + 3800, born=T0 + 1790)
    assert problems(workload(tmp_path, **lines)) == {}


def test_a_rolled_back_transaction_is_consumed_only_if_checked_back_and_committed(tmp_path: Path) -> None:
    lines = clean(tmp_path)
    lines["transaction_consumer"] += consumed(1, T0 + 7000)
    assert list(problems(workload(tmp_path, **lines))) == ["java: rolled-back transaction consumed"]
    lines["transaction_producer"] += f"CHECKED\t{T0 + 6500}\t1\tCOMMIT_MESSAGE\tt\tID1\t0\n"
    assert problems(workload(tmp_path, **lines)) == {}


def test_a_checked_back_transaction_that_is_never_consumed_is_lost(tmp_path: Path) -> None:
    lines = clean(tmp_path)
    lines["transaction_consumer"] = consumed(0, T0 + 5) + consumed(3, T0 + 6)
    assert problems(workload(tmp_path, **lines)) == {"java: lost acknowledged (transactions)": ["2"]}


def test_a_message_nobody_sent_is_a_violation(tmp_path: Path) -> None:
    lines = clean(tmp_path)
    lines["delayed_consumer"] += consumed(99, T0 + 5000)
    assert problems(workload(tmp_path, **lines)) == {"java: consumed but never sent": ["delayed-consumer: seq 99"]}
