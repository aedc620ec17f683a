"""Commitlog appends while the flush thread fsyncs the same segment: with and without reserved blocks.

    python -m bench.append_stall [--seconds 8] [--rounds 4] [--batch 100] [--size 1024]

One process, the broker's own ``CommitLog``: the main thread appends a batch of ``--batch`` records of
``--size`` bytes every 4 ms and times each append; a second thread fsyncs the log every 500 ms (the
``ASYNC_FLUSH`` default). Case "growing": the segment's blocks are allocated as the file grows (the
reservation turned off). Case "reserved": the build's behaviour, the segment's blocks reserved when it
is created (``services.common.durable.reserve``). The cases alternate, ``--rounds`` times each, so drift
in the machine falls on both alike; the ratio compares their slow appends.
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

from bench.common import scratch_dir, summary, table, write_result
from services.broker.commitlog import CommitLog, NewRecord

SLOW_MS = 2.0


def run_case(reserved: bool, seconds: float, batch: int, size: int) -> list[float]:
    """Append for ``seconds`` with the flush thread running; the latency of every append, in ms."""
    log = CommitLog(scratch_dir("mqctl-bench-append-"), 64 * 2**20, reserve_blocks=reserved)
    log.open()
    stop = threading.Event()

    def flusher() -> None:
        while not stop.wait(0.5):
            log.flush()

    thread = threading.Thread(target=flusher, daemon=True)
    thread.start()
    body = b"x" * size
    latencies: list[float] = []
    queue_offset = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            records = [NewRecord("Bench", 0, queue_offset + i, 0, {}, body) for i in range(batch)]
            queue_offset += batch
            t0 = time.perf_counter()
            log.append_batch(records)
            latencies.append((time.perf_counter() - t0) * 1000)
            time.sleep(0.004)
    finally:
        stop.set()
        thread.join()
        log.close()
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=8, help="time per case per round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    samples: dict[str, list[float]] = {"growing": [], "reserved": []}
    for r in range(args.rounds):
        for name in ("growing", "reserved") if r % 2 == 0 else ("reserved", "growing"):
            samples[name] += run_case(name == "reserved", args.seconds, args.batch, args.size)
    rows: list[dict[str, Any]] = []
    for name, lat in samples.items():
        s = summary(lat)
        rows.append({"case": name, "appends": s["n"], "p50Ms": s["p50"], "p99Ms": s["p99"], "maxMs": s["max"],
                     f"over{SLOW_MS:g}Ms": sum(x > SLOW_MS for x in lat)})
    slow = {row["case"]: row[f"over{SLOW_MS:g}Ms"] for row in rows}
    print(table(rows, ["case", "appends", "p50Ms", "p99Ms", "maxMs", f"over{SLOW_MS:g}Ms"]))
    print(f"\nslowest append, growing / reserved (same run): {rows[0]['maxMs'] / rows[1]['maxMs']:.1f}x; "
          f"appends over {SLOW_MS:g} ms: {slow['growing']} against {slow['reserved']}")
    path = write_result("append_stall", {"args": vars(args), "cases": rows,
                                         "maxRatio": rows[0]["maxMs"] / rows[1]["maxMs"]})
    print(f"result: {path}")


if __name__ == "__main__":
    main()
