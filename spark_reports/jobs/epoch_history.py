"""The epoch-history report as a ``spark-submit`` job::

    spark-submit [--master URL] [--conf k=v ...] --py-files spark_reports.zip epoch_history.py \\
        --input DIR --output DIR

The metrics are :mod:`spark_reports.epoch_metrics`; this file only reads the arguments and runs
:func:`spark_reports.pipeline.run_report` with the session spark-submit gives it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from spark_reports.errors import ReportError
from spark_reports.paths import check_input, prepare_output
from spark_reports.pipeline import run_report
from spark_reports.session import SessionOptions, build_session


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="epoch_history.py",
        description="Summarise a controller/broker epoch-history dataset (see docs/report.md).")
    parser.add_argument("--input", required=True, help="dataset directory with events/ and epochs/")
    parser.add_argument("--output", required=True, help="directory for summary.json, CSV, Parquet, HTML, PNG")
    parser.add_argument("--as-of", type=int, default=None,
                        help="epoch ms (default: now, or the newest event if later)")
    parser.add_argument("--cluster", default=None, help="only this clusterName")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit [--master URL] [--conf k=v ...] --py-files spark_reports.zip epoch_history.py
    --input DIR --output DIR``: the master and settings are spark-submit's, never overridden here."""
    args = parse_args(argv)
    started = time.monotonic()
    try:
        check_input(Path(args.input))  # before the session: a wrong path is a usage error, not a Spark one
        prepare_output(Path(args.output))
        spark = build_session(SessionOptions(master=None, ship_package=False))
        try:
            result = run_report(spark, args.input, args.output, args.as_of, args.cluster)
        finally:
            spark.stop()
    except ReportError as exc:
        print(f"Error: {exc.remark}", file=sys.stderr)
        return exc.exit_code
    print(f"{len(result.summary['groups'])} group(s) as of {result.summary['asOf']}; wrote {args.output} "
          f"in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
