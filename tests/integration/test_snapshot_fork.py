"""A controller killed while pysyncobj's forked snapshot child runs must be restartable at once: the
child closes the inherited listening sockets and dies with its parent (no orphan holding the ports or
renaming an old snapshot over a newer one)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mqctl.cluster import free_port_pair, wait_until

pytestmark = pytest.mark.component

SCRIPT = textwrap.dedent("""
    import os, socket, sys, threading, time
    from services.controller import raft_fork

    port, out = int(sys.argv[1]), sys.argv[2]
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen()

    def tick(_obj):  # stands in for pysyncobj's tick thread, which forks to write a snapshot
        pid = os.fork()
        if pid == 0:
            time.sleep(60)  # a long snapshot
            os._exit(0)
        with open(out, "w") as f:
            f.write(str(pid))
        time.sleep(60)

    class FakeSyncObj:
        _autoTickThread = staticmethod(tick)

    raft_fork.SyncObj = FakeSyncObj
    raft_fork.install_fork_hook()
    threading.Thread(target=FakeSyncObj._autoTickThread, args=(None,), daemon=True).start()
    time.sleep(60)
""")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_killed_parent_leaves_no_snapshot_child_holding_its_port(tmp_path: Path) -> None:
    port = free_port_pair()
    out = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, "-c", SCRIPT, str(port), str(out)],
                              cwd=Path(__file__).resolve().parents[2])
    try:
        wait_until(lambda: out.exists() and out.read_text().strip(), 30, "the forked child")
        child = int(out.read_text())
        assert alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        wait_until(lambda: not alive(child), 10, "the snapshot child to die with its parent")
        with socket.socket() as s:  # the port is free for the restarted process
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=10)
        if out.exists() and out.read_text().strip():
            try:
                os.kill(int(out.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_other_forks_keep_their_sockets() -> None:
    """Only the tick thread's forks are touched: a fork from the main thread keeps inherited sockets."""
    from services.controller import raft_fork

    raft_fork.install_fork_hook()
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        try:
            a.send(b"x")
            os._exit(0)
        except OSError:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and b.recv(1) == b"x"
    a.close()
    b.close()
