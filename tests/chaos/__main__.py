"""``python -m tests.chaos --minutes 10 [--seed N]``: a long fault-injection run with a verdict."""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tests.chaos.checker import check
from tests.chaos.harness import FAULT_KINDS, ChaosRun


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=None, help="replay a run (printed at the start of each run)")
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--faults", default=",".join(FAULT_KINDS), help="comma-separated fault kinds")
    parser.add_argument("--data-dir", default=None, help="keep the cluster's files here")
    parser.add_argument("--json", default=None, help="write the verdict as JSON to this file")
    parser.add_argument("--controller-protocol", choices=("http", "remoting"), default="http",
                        help="how the brokers talk to the controllers")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1, 2**31)
    print(f"[chaos] seed={seed} minutes={args.minutes} (replay with --seed {seed})", flush=True)
    root = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="mqctl-chaos-"))
    run = ChaosRun(root, seed, args.minutes * 60, producers=args.producers,
                   kinds=tuple(k for k in args.faults.split(",") if k), on_event=lambda s: print(s, flush=True),
                   controller_protocol=args.controller_protocol)
    started = time.monotonic()
    try:
        run.start()
        history = run.run()
        assert run.cluster is not None
        run.heal(timeout=120)
        time.sleep(3)
        verdict = check(run.cluster, history)
    finally:
        run.stop()
        if not args.data_dir:
            shutil.rmtree(root, ignore_errors=True)
    report = {"seed": seed, "seconds": round(time.monotonic() - started, 1), "ok": verdict.ok,
              "stats": verdict.stats, "violations": {k: v for k, v in verdict.violations.items() if v}}
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())
