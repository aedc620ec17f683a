"""Processes of a local cluster: start one (``spawn``), signal and wait for it, poll a condition with a
deadline, pick free ports below the ephemeral range, and the controllers' shared Raft password file."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from services.common.errors import MqctlError
from services.common.ports import port_free
from services.controller.raft_secret import write_password_file

__all__ = ["PORT_RANGE_ENV", "RAFT_PASSWORD_FILE", "ephemeral_port_start", "free_port_pair", "free_port_span",
           "pid_is_ours", "pid_running", "port_free", "port_range", "raft_password_props", "running", "send_and_wait",
           "signal_pid", "spawn", "wait_until"]

#: The Raft password file shared by the controllers of a local cluster (mode 0600), in its data directory.
RAFT_PASSWORD_FILE = "raft.password"
#: ``LOW-HIGH``: the ports local clusters pick from (so that runs side by side never choose the same one).
PORT_RANGE_ENV = "MQCTL_PORT_RANGE"
#: The ports this process handed out last: a port chosen for a server that has not bound it yet is still
#: free, and is not handed out again to the next server chosen before that one starts.
_HANDED_OUT: deque[int] = deque(maxlen=1024)


def raft_password_props(data_dir: Path, extra: dict[str, Any]) -> dict[str, Any]:
    """``controllerRaftPasswordFile`` for every controller of a cluster in ``data_dir``, pointing at a
    file created on first use; nothing when ``extra`` already names a password."""
    if extra.get("controllerRaftPassword") or extra.get("controllerRaftPasswordFile"):
        return {}
    path = data_dir / RAFT_PASSWORD_FILE
    if not path.exists():
        write_password_file(path)
    return {"controllerRaftPasswordFile": str(path.resolve())}


def ephemeral_port_start() -> int:
    """The first port the kernel hands out for outgoing connections (Linux; 32768 elsewhere)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def port_range() -> tuple[int, int]:
    """The ports local clusters pick from, both ends included: $MQCTL_PORT_RANGE (``LOW-HIGH``), else from
    10000 to just below the ephemeral range. Below it, because a port in it can be taken, while its server
    is down, as the source port of some outgoing connection (even a TCP self-connection of a client polling
    it), and the restarted server then cannot bind it."""
    text = os.environ.get(PORT_RANGE_ENV, "")
    low_text, _, high_text = text.partition("-")
    if low_text.isdigit() and high_text.isdigit() and 1024 <= int(low_text) < int(high_text) <= 65535:
        return int(low_text), int(high_text)
    if text:
        raise MqctlError(f"{PORT_RANGE_ENV}={text!r} is not LOW-HIGH with 1024 <= LOW < HIGH <= 65535")
    return 10000, max(ephemeral_port_start() - 2, 12000)


def free_port_span(span: int, used: set[int] | None = None, step: int = 1) -> int:
    """A port P such that P .. P+span-1 are all free (and not in ``used``, which gets them, nor among the
    last ports this process handed out), from ``port_range()``; P is a multiple of ``step``."""
    used = used if used is not None else set()
    rng = random.Random()
    low, high = port_range()
    first, last = -(-low // step) * step, high - span + 1
    for _ in range(500):
        if last < first:
            break
        port = rng.randrange(first, last + 1, step)
        ports = range(port, port + span)
        if not used.intersection(ports) and not set(_HANDED_OUT).intersection(ports) \
                and all(port_free(p) for p in ports):
            used.update(ports)
            _HANDED_OUT.extend(ports)
            return port
    raise MqctlError(f"could not find {span} adjacent free ports on 127.0.0.1 between {low} and {high}")


def free_port_pair(used: set[int] | None = None) -> int:
    """A port P such that P and P+1 are both free (API and Raft), from ``port_range()``."""
    return free_port_span(2, used)


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001  polling: remember the last failure for the message
            last_error = exc
        time.sleep(interval)
    detail = f" (last error: {last_error})" if last_error else ""
    raise MqctlError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")


def spawn(module: str, conf: Path, log_file: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``python -m <module> -c <conf>`` in its own session, output appended to ``log_file``."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", module, "-c", str(conf)], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})


def running(process: subprocess.Popen[bytes] | None) -> bool:
    return process is not None and process.poll() is None


def send_and_wait(process: subprocess.Popen[bytes] | None, sig: int, grace: float = 10.0) -> None:
    """Signal a running process; for SIGKILL/SIGTERM wait for it (SIGKILL after ``grace`` seconds)."""
    if not running(process):
        return
    assert process is not None
    process.send_signal(sig)
    if sig in (signal.SIGKILL, signal.SIGTERM):
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped) is not running
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return True


def pid_is_ours(pid: int, conf: Path) -> bool:
    """The pid still belongs to this node's process (pids are reused after a reboot)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return str(conf).encode() in f.read()
    except OSError:
        return True


def signal_pid(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
