"""``python -m spark_reports.submit [DIR]``: prepare a ``spark-submit`` run of the epoch-history job.

Writes ``DIR/spark_reports.zip`` (the package, for ``--py-files``) and prints the command to run, with
the job file's path. spark-submit takes a .py file, not ``-m module``; Python applications run in client
mode only on a standalone cluster, so the driver runs where spark-submit runs.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from spark_reports.session import package_zip


def job_file() -> Path:
    return Path(__file__).resolve().parent / "jobs" / "epoch_history.py"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    directory = Path(args[0] if args else ".").resolve()
    directory.mkdir(parents=True, exist_ok=True)
    archive = package_zip(directory)
    command = ["spark-submit", "--master", "spark://HOST:7077", "--py-files", str(archive), str(job_file()),
               "--input", "DATASET_DIR", "--output", "OUTPUT_DIR"]
    print(f"wrote {archive}\n\n{shlex.join(command)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
