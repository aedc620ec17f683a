"""Draw the side-by-side comparison with RocketMQ from the benchmarks' result files: one bar per figure, the
ratio ours / RocketMQ's on a log scale, its goal marked, green where the goal is met and red where not.

    python -m bench.plot_vs_rocketmq [--out bench/results/vs_rocketmq.png]

Reads the ``vs_rocketmq*`` results (``bench.vs_rocketmq``, ``bench.vs_rocketmq_consume``,
``bench.vs_rocketmq_failover``, ``bench.vs_rocketmq_controller_failover``, ``bench.vs_rocketmq_controller_load``,
``bench.vs_rocketmq_restart``, ``bench.vs_rocketmq_footprint``) from the results directory; a missing file
(or figure) leaves its bar out. docs/img/vs_rocketmq.png is drawn with ``--out docs/img/vs_rocketmq.png``.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import RESULTS


@dataclass(frozen=True)
class Bar:
    label: str
    ratio: float
    goal: float
    higher_is_better: bool

    @property
    def met(self) -> bool:
        return self.ratio >= self.goal if self.higher_is_better else self.ratio <= self.goal


def load(path: Path) -> dict[str, Any] | None:
    try:
        result: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return result


def _sends_label(result: dict[str, Any]) -> str:
    mode = ("sync, " + str(result.get("threads")) + " threads" if result.get("mode", "sync") == "sync"
            else f"async, window {result.get('window')}")
    flush = "SYNC_FLUSH" if result.get("flush") == "SYNC_FLUSH" else "ASYNC_FLUSH"
    replicas = int(result.get("replicas", 1))
    return f"sends msg/s: {replicas} replica{'s' if replicas > 1 else ''}, {flush}, {mode}"


def ratio_of(results: Path, name: str, key: str) -> tuple[dict[str, Any], float] | None:
    """A result file and one of its ratios, when both are there and the ratio is a positive number."""
    result = load(results / f"{name}.json")
    value = (result or {}).get("ratios_ours_over_rocketmq", {}).get(key)
    if result is None or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    return result, float(value)


#: (result file, ratio key, label, goal, whether higher is better), after the sends.
FIGURES = (
    ("vs_rocketmq_consume", "drain_msgs_per_s", "consumption: draining a backlog, msg/s", 1.0, True),
    ("vs_rocketmq_failover_kill", "route_p50_ms", "failover p50, master SIGKILL → new master routed", 0.5, False),
    ("vs_rocketmq_failover_kill", "p50_ms", "failover p50, master SIGKILL → first SEND_OK", 0.5, False),
    ("vs_rocketmq_failover_stop", "route_p50_ms", "failover p50, master SIGSTOP → new master routed", 0.5, False),
    ("vs_rocketmq_failover_stop", "p50_ms", "failover p50, master SIGSTOP → first SEND_OK", 0.5, False),
    ("vs_rocketmq_controller_failover", "p50_ms", "controller leader SIGKILL → next write, p50", 0.5, False),
    ("vs_rocketmq_controller_load", "registrations_per_s", "controller load: registrations/s", 1.0, True),
    ("vs_rocketmq_controller_load", "alters_per_s", "controller load: SyncStateSet alters/s", 1.0, True),
    ("vs_rocketmq_restart", "broker_master_s", "restart: broker (1 GiB) to master again", 1.0, False),
    ("vs_rocketmq_restart", "controllers_serving_s", "restart: controllers (100,000 events) to a write", 1.0,
     False),
    ("vs_rocketmq_footprint", "total rss_mib", "RSS, whole cluster at idle", 0.25, False),
    ("vs_rocketmq_footprint_load", "total rss_mib", "RSS, whole cluster at half load", 0.25, False),
    ("vs_rocketmq_sends_sync_1r_async_flush", "server_rss_mib", "RSS under load: controller(s) and one broker", 0.25,
     False),
)


def bars(results: Path) -> Iterator[Bar]:
    for path in sorted(results.glob("vs_rocketmq_sends*.json")):
        found = ratio_of(results, path.stem, "msgs_per_s")
        if found:
            yield Bar(_sends_label(found[0]), found[1], 1.0, True)
    for name, key, label, goal, higher in FIGURES:
        found = ratio_of(results, name, key)
        if found:
            yield Bar(label, found[1], goal, higher)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "vs_rocketmq.png")
    args = parser.parse_args(argv)
    found = list(bars(RESULTS))
    if not found:
        raise SystemExit(f"no vs_rocketmq results in {RESULTS}: run python -m bench.vs_rocketmq first")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 0.45 * len(found) + 1.2))
    rows = range(len(found))[::-1]
    ax.barh(list(rows), [b.ratio for b in found], color=["#4f9a5a" if b.met else "#c8553d" for b in found],
            height=0.6)
    for row, bar in zip(rows, found, strict=True):
        ax.plot([bar.goal, bar.goal], [row - 0.4, row + 0.4], color="black", linewidth=1.5)
        ax.text(bar.ratio * 1.04, row, f"{bar.ratio:.2f}×", va="center", fontsize=8)
    ax.set_xscale("log")
    ax.axvline(1.0, color="#999999", linewidth=0.8, linestyle=":")
    ax.set_yticks(list(rows), [b.label for b in found], fontsize=8)
    ax.set_xlabel("ours / RocketMQ's (log scale; black tick: the goal, green: met, red: not)", fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    ax.set_xlim(min(0.05, *(b.ratio / 1.5 for b in found)), max(3.0, *(b.ratio * 1.5 for b in found)))
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=100)
    print(f"plot: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
