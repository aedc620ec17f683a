"""The report's directories, checked before Spark starts, and what a failed run leaves behind.

Starting Spark takes seconds and its errors name Java classes, so the paths a user gives are checked
first: the input must be a readable dataset (``events/`` and ``epochs/`` with data files), and the
output must be a directory we can create and write in. A run that fails before the report is written
removes the directories it created itself (and only those, and only while they are empty of anything
but what it wrote): a failed ``mqctl report -a <unreachable>`` leaves nothing behind.
"""

from __future__ import annotations

import errno
import shutil
import tempfile
from pathlib import Path

from spark_reports.errors import DatasetError, OutputError

TABLES = ("events", "epochs")
DATA_SUFFIXES = (".jsonl", ".parquet")


def check_input(root: Path) -> None:
    """A :class:`DatasetError` unless ``root`` holds ``events/`` and ``epochs/`` with readable data files."""
    if not root.exists():
        raise DatasetError(f"no dataset at {root}: the directory does not exist")
    if not root.is_dir():
        raise DatasetError(f"no dataset at {root}: it is not a directory")
    for table in TABLES:
        files = _data_files(root, table)
        if not files:
            raise DatasetError(f"malformed dataset {root}: {root / table} holds no *.jsonl or *.parquet file")
        for path in files:
            _check_readable(path)


def dataset_bytes(root: Path) -> int:
    """The size of the dataset's data files (checked by :func:`check_input` first)."""
    total = 0
    for table in TABLES:
        for path in _data_files(root, table):
            try:
                total += path.stat().st_size
            except OSError as exc:
                raise DatasetError(f"cannot read the dataset {root}: {exc.strerror or exc}: {exc.filename}") from exc
    return total


def _data_files(root: Path, table: str) -> list[Path]:
    directory = root / table
    if not directory.is_dir():
        raise DatasetError(f"malformed dataset {root}: no {table}/ directory (expected events/ and epochs/ "
                           "holding *.jsonl or *.parquet files)")
    try:
        return [p for p in directory.rglob("*") if p.suffix in DATA_SUFFIXES and p.is_file()]
    except OSError as exc:
        raise DatasetError(f"cannot read the dataset {root}: {exc.strerror or exc}: {exc.filename}") from exc


def _check_readable(path: Path) -> None:
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise DatasetError(f"cannot read {path}: {exc.strerror or exc}") from exc


def prepare_output(directory: Path) -> list[Path]:
    """Create ``directory`` (and its missing parents) and check that a file can be written in it.

    Returns the directories this call created, outermost first, for :func:`remove_created`. Raises an
    :class:`OutputError` naming the path and the system's reason."""
    missing = _missing_directories(directory.absolute())
    created: list[Path] = []
    try:
        for path in missing:
            path.mkdir()
            created.append(path)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".mqctl-write-check-"):
            pass
    except OSError as exc:
        remove_created(created)
        raise OutputError(_output_problem(directory, exc)) from exc
    return created


def _missing_directories(directory: Path) -> list[Path]:
    """The directories to create, outermost first; an OutputError if something in the way is not one."""
    missing = []
    path = directory
    while not path.exists() and not path.is_symlink() and path != path.parent:
        missing.append(path)
        path = path.parent
    if not path.is_dir():
        raise OutputError(f"cannot write the report to {directory}: {path} is not a directory")
    return list(reversed(missing))


def _output_problem(directory: Path, exc: OSError) -> str:
    failed = Path(exc.filename) if exc.filename else None
    reason = exc.strerror or str(exc)
    if exc.errno == errno.ENOENT and failed is not None:  # a parent that exists but takes no new entries
        reason = f"{failed.parent} does not accept new directories"
    elif failed is not None and failed != directory.absolute():
        reason = f"{failed}: {reason}"
    return f"cannot write the report to {directory}: {reason}"


def remove_created(created: list[Path]) -> None:
    """Remove directories this run created, innermost first; a directory that is not empty (something
    else wrote there meanwhile) is left, and so are its parents."""
    for path in reversed(created):
        try:
            path.rmdir()
        except OSError:
            return


def remove_tree_if_new(path: Path, existed: bool) -> None:
    """Remove ``path`` (a dataset this run was writing) unless it existed before the run."""
    if not existed and path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
