"""Draw the failover distributions from the benchmarks' results, one bar per kill.

    python -m bench.plot [--out docs/img/failover.png]

Reads ``failover_kill.json``, ``failover_stop.json`` (``bench.failover``) and ``controller_failover.json``
(``bench.controller_failover``) from the results directory; a missing file leaves its panel out.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.common import RESULTS

PHASES = (("detectAndElectMs", "detect + elect", "#5b8fd9"), ("roleChangeMs", "role change", "#f0a030"),
          ("clientRecoveryMs", "client recovery", "#7cb87c"))


def load(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=RESULTS / "failover.png")
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(n, t) for n, t in (("failover_kill", "Broker master SIGKILL → first PUT_OK"),
                                  ("failover_stop", "Broker master SIGSTOP (3 s heartbeat timeout) → first PUT_OK"),
                                  ("controller_failover", "Controller leader SIGKILL → first committed write"))
              if load(n) is not None]
    if not panels:
        raise SystemExit(f"no failover results in {RESULTS}: run python -m bench.failover first")
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.6 * len(panels)), squeeze=False)
    for ax, (name, title) in zip((row[0] for row in axes), panels, strict=True):
        result = load(name)
        assert result is not None
        kills = result["kills"]
        if name == "controller_failover":
            totals = sorted(k["firstWrite"] for k in kills)
            ax.bar(range(len(totals)), totals, color="#5b8fd9", label="first committed write")
        else:
            kills = sorted(kills, key=lambda k: k["totalMs"])
            bottom = [0.0] * len(kills)
            for key, label, color in PHASES:
                values = [float(k[key]) for k in kills]
                ax.bar(range(len(kills)), values, bottom=bottom, color=color, label=label)
                bottom = [b + v for b, v in zip(bottom, values)]
        ax.set_title(f"{title} ({len(kills)} kills, sorted)", fontsize=9, loc="left")
        ax.set_ylabel("ms", fontsize=8)
        ax.set_xticks([])
        ax.tick_params(labelsize=8)
        ax.legend(fontsize=7, loc="upper left", frameon=False)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=100)
    print(f"plot: {args.out}")


if __name__ == "__main__":
    main()
