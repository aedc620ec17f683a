"""A damaged record in an old commitlog segment reaches a consumer as a clear error naming the offset,
through a real broker process and the CLI (issue 19 item 5: consumers used to stall at that queue
offset, getting NO_MESSAGE forever).

Old segments are not scanned at start, so the broker starts; the pull of the damaged message answers
SYSTEM_ERROR with status MESSAGE_DAMAGED and a remark naming the file and offset, and ``mqctl
consumeMessage`` prints it as its one error line (exit 4). The broker stays fenced (its controller
address leads nowhere): the pull path does not need a role.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from mqctl.cluster import make_broker, wait_until
from services.broker import contract as bc
from services.broker.store import Message, MessageStore

pytestmark = pytest.mark.component

SEG = 4096
TS = 1_700_000_000_000


def test_a_damaged_old_record_is_a_clear_pull_error_not_an_endless_no_message(tmp_path: Path) -> None:
    node = make_broker(tmp_path, "broker-a", 1, "127.0.0.1:1", mappedFileSizeCommitLog=SEG,
                       maxMessageSize=1500, defaultTopicQueueNums=2)
    store = MessageStore(node.store_dir, node.address, segment_size=SEG, queue_nums=2, max_message_size=1500)
    store.open()
    store.epochs.append(1, 0)
    placed = [store.append(Message("T", f"m{i}-".encode() + bytes(300), queue_id=i % 2), TS) for i in range(60)]
    store.set_confirm_offset(store.max_offset)
    store.close()
    victim = placed[2]  # queue 0, queue offset 1, in the first of many segments
    segment = node.store_dir / "commitlog" / f"{0:020d}"
    data = bytearray(segment.read_bytes())
    data[victim.next_offset - 5] ^= 0x40
    segment.write_bytes(bytes(data))
    node.start()
    try:
        with httpx.Client(timeout=5.0) as client:
            wait_until(lambda: client.get(f"http://{node.address}/healthz").status_code == 200, 60,
                       "the broker to serve HTTP")
            url = f"http://{node.address}{bc.PULL_MESSAGE}"
            first = client.get(url, params={"topic": "T", "queueId": 0, "queueOffset": 0}).json()
            assert first["code"] == 0 and first["data"]["status"] == "FOUND"
            assert len(first["data"]["messages"]) == 1 and first["data"]["nextBeginOffset"] == 1
            damaged = client.get(url, params={"topic": "T", "queueId": 0, "queueOffset": 1}).json()
            assert damaged["code"] == 1 and damaged["data"]["status"] == "MESSAGE_DAMAGED"
            assert damaged["data"]["nextBeginOffset"] == 1 and damaged["data"]["messages"] == []
            assert f"commitlog/{segment.name}, offset {victim.commit_log_offset}: CRC mismatch" in damaged["remark"]
            assert str(tmp_path) not in damaged["remark"]  # the broker's file paths stay on the broker
        cli = subprocess.run(
            [sys.executable, "-m", "mqctl.cli", "consumeMessage", "-t", "T", "-q", "0", "-n", "100",
             "--brokerAddr", node.address],
            check=False, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        errors = [line for line in cli.stderr.splitlines() if line.startswith("Error:")]
        assert cli.returncode == 4, cli.stdout + cli.stderr
        assert len(errors) == 1 and f"offset {victim.commit_log_offset}" in errors[0] and "[SYSTEM_ERROR]" in errors[0]
    finally:
        node.stop()
