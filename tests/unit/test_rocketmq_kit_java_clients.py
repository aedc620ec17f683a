"""The kit's side of our Java test program (the tier's one Java program): its history files read back (tests/rocketmq/client_history.py), the
numbered messages' rules (the same as Clients.java's), its build folder and command line
(tests/rocketmq/javaclients.py), and what the failover scenario makes of the histories
(tests/interop/java_failover.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.interop.java_failover import Outcome
from tests.rocketmq.client_history import Consumed, History, expected_body_length, expected_keys, expected_tag
from tests.rocketmq.javaclients import MAIN_CLASS, SOURCE, JavaClients, source_digest

#: Lines as History.java writes them (a tab between fields), the last one still being written.
HISTORY = (
    "STARTED\t1000\tproduce\tV5_3_3\n"
    "SENT\t1001\t0\tsync\tSEND_OK\tbroker-a\t2\t7\t7F0000010000\t127.0.0.1:10911\n"
    "FAILED\t1002\t1\tasync\tMQClientException: Send [3] times, still failed\n"
    "ONEWAY\t1003\t2\n"
    "SENT\t1004\t3\tbatch\tSEND_OK\tbroker-a\t1\t4\tA,B\t127.0.0.1:10921\n"
    "SENT\t1005\t4\tbatch\tFLUSH_SLAVE_TIMEOUT\tbroker-a\t1\t5\tA,B\t127.0.0.1:10921\n"
    "CONSUMED\t1006\t3\t1\t4\tTagA\tkey-3\t6\t0\tbroker-a\t/127.0.0.1:10911\tA\n"
    "CONSUMED\t1007\t3\t1\t4\tTagA\tkey-3\t6\t0\tbroker-a\t/127.0.0.1:10911\tA\n"
    "ASSIGNED\t1008\t[MessageQueue [topic=T, brokerName=broker-a, queueId=0]]\n"
    "DONE\t1009\t2\t1\t1\t0\n"
    "SENT\t1010\t5\tsy"
)


def test_a_history_is_read_line_by_line_and_a_line_being_written_is_left_for_later() -> None:
    history = History.parse(HISTORY)
    assert history.started == ("produce", "V5_3_3") and history.done == ("2", "1", "1", "0")
    assert [s.seq for s in history.sent] == [0, 3, 4]
    assert (history.sent[1].msg_id, history.sent[1].store_host) == ("A,B", "127.0.0.1:10921")
    assert history.failed[0].error == "MQClientException: Send [3] times, still failed"
    assert history.oneway == (2,) and history.other == (HISTORY.splitlines()[8],)
    assert history.consumed[0].store_host == "127.0.0.1:10911"


def test_only_send_ok_is_acknowledged_and_repeated_deliveries_are_counted() -> None:
    history = History.parse(HISTORY)
    assert history.acknowledged == {0, 3}  # FLUSH_SLAVE_TIMEOUT is stored, not acknowledged
    assert history.acknowledged_after(1001) == {3}
    assert history.statuses() == {"SEND_OK": 2, "FLUSH_SLAVE_TIMEOUT": 1}
    assert (history.seqs, history.duplicates) == (frozenset({3}), 1)
    assert History.parse("") == History()


def test_a_paused_producer_and_its_last_number() -> None:
    history = History.parse("PAUSED\t1000\t5\t0\nRESUMED\t1001\t5\nFAILED\t1002\t5\tsync\tboom\n"
                            "SENT\t1003\t6\tsync\tSLAVE_NOT_AVAILABLE\tbroker-a\t0\t1\tA\t-\n")
    assert history.paused == (5,) and history.other == ()
    assert history.last_seq == 6 and History().last_seq == -1
    assert [getattr(s, "status", "FAILED") for s in history.not_acknowledged] == ["SLAVE_NOT_AVAILABLE", "FAILED"]


def consumed(seq: int, keys: str, tags: str, length: int) -> Consumed:
    return Consumed(0, seq, 0, 0, tags, keys, length, 0, "broker-a", "127.0.0.1:10911", "ID")


def test_a_numbered_message_must_carry_its_keys_tag_and_body() -> None:
    assert (expected_keys(7), expected_tag(7), expected_body_length(7)) == ("key-7", "TagB", 5006)
    assert (expected_tag(9), expected_body_length(9), expected_body_length(57)) == ("TagA", 6, 5007)
    assert consumed(9, "key-9", "TagA", 6).mismatch() is None
    assert "keys 'key-8'" in (consumed(9, "key-8", "TagA", 6).mismatch() or "")
    assert consumed(7, "key-7", "TagB", 6).mismatch() is not None  # a padded body that lost its padding
    assert consumed(-1, "x", "y", 3).mismatch() is not None  # a body the program did not write


def test_a_build_folder_per_version_and_source(tmp_path: Path) -> None:
    copy = tmp_path / "java"
    shutil.copytree(SOURCE, copy, ignore=shutil.ignore_patterns("target"))
    assert source_digest(copy) == source_digest()
    main = next(copy.rglob("Main.java"))
    main.write_text(main.read_text() + "\n")
    assert source_digest(copy) != source_digest()
    clients = JavaClients("5.3.3", cache=tmp_path / "cache")
    assert clients.folder == tmp_path / "cache" / "5.3.3" / "java-clients" / source_digest()
    assert not clients.is_built()


def test_the_command_line_gives_each_option_as_name_and_value(tmp_path: Path) -> None:
    clients = JavaClients("5.5.0", cache=tmp_path)
    command = clients.command("java", "lite-pull", tmp_path / "run",
                              {"namesrv": "a:1;b:2", "deadline_s": 60, "assign": "true"})
    assert command[0] == "java" and f"-Duser.home={tmp_path / 'run'}" in command
    assert command[command.index("-cp") + 1] == f"{clients.folder}/classes:{clients.folder}/lib/*"
    assert command[command.index(MAIN_CLASS):] == [MAIN_CLASS, "lite-pull", "--namesrv", "a:1;b:2",
                                                   "--deadline-s", "60", "--assign", "true"]


def test_what_a_consumer_lost_or_read_again() -> None:
    outcome = Outcome("side", first_run=frozenset({1, 2, 3}), acknowledged=frozenset({1, 2, 100, 101}),
                      consumed={"push": frozenset({1, 2, 100}), "push-restart-again": frozenset({2, 100, 101})})
    assert outcome.lost("push") == {101}
    assert outcome.lost("push-restart-again") == set()  # a restarted consumer owes only the second run
    assert outcome.lost("lite") == {1, 2, 100, 101}  # never ran
    assert outcome.reread("push-restart-again") == {2}
