"""Shared helpers for the benchmarks: a local cluster on free ports, timing, result files."""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import platform
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from services.common.controller_client import ControllerClient
from services.controller import contract

#: Where results go (``$MQCTL_BENCH_RESULTS`` overrides it, e.g. for the smoke tests).
RESULTS = Path(os.environ.get("MQCTL_BENCH_RESULTS") or Path(__file__).resolve().parent / "results")


def scratch_dir(prefix: str) -> Path:
    """A temporary directory for a benchmark's clusters and stores, removed when the benchmark exits
    (a 10-minute write benchmark leaves tens of GB of commitlog); ``MQCTL_BENCH_KEEP=1`` keeps it."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    if not os.environ.get("MQCTL_BENCH_KEEP"):
        atexit.register(shutil.rmtree, root, True)
    return root


def run_workers(worker: Callable[[int], None], count: int) -> float:
    """Run ``worker(0) … worker(count - 1)`` on as many threads at once; seconds until all finished."""
    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(count)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - started


class Sliced(Protocol):
    def slice(self, seconds: float, measured: bool = True) -> None: ...


def alternate(cases: Sequence[Sliced], rounds: int, seconds: float, warmup: float) -> None:
    """Warm every case up for ``warmup`` s (not measured), then measure each one in ``rounds`` slices of
    ``seconds / rounds``, alternating the order (A B, B A, A B, ...). This machine's speed drifts by tens
    of percent within a minute; alternating puts the same drift into both sides of a ratio."""
    for case in cases:
        case.slice(warmup, measured=False)
    for r in range(rounds):
        for case in cases if r % 2 == 0 else cases[::-1]:
            case.slice(seconds / rounds)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50": percentile(values, 50), "p90": percentile(values, 90),
            "p99": percentile(values, 99), "max": max(values) if values else float("nan"),
            "mean": statistics.fmean(values) if values else float("nan")}


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


def write_result(name: str, result: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {"benchmark": name, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine(),
               **result}
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    widths = [max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(_fmt(r.get(c)).ljust(w) for c, w in zip(columns, widths)) for r in rows]
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.1f}" if abs(v) >= 10 else f"{v:.3f}"
    if isinstance(v, int):
        return f"{v:,}"
    return "" if v is None else str(v)


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process (0 when it is gone)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------- load generators
def request_bytes(controller: str, path: str, body: dict[str, Any]) -> bytes:
    """One HTTP/1.1 POST with a JSON body, encoded once and sent many times on a keep-alive connection."""
    payload = json.dumps(body, separators=(",", ":")).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: {controller}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n")
    return head.encode() + payload


async def read_response(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return await reader.readexactly(length)


def events_since(client: ControllerClient, from_index: int) -> list[dict[str, Any]]:
    """Every controller event from ``from_index`` on, page by page."""
    found: list[dict[str, Any]] = []
    while True:
        env = client.call("GET", contract.EVENTS, params={"fromIndex": from_index, "limit": 10_000})
        found += env.data["events"]
        if not env.data["events"]:
            return found
        from_index = env.data["nextIndex"]
