"""The report's input and output directories, checked before Spark starts, and the cleanup of a failed run."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_reports.errors import DatasetError, OutputError
from spark_reports.paths import check_input, dataset_bytes, prepare_output, remove_created, remove_tree_if_new


def test_prepare_output_returns_what_it_created(tmp_path: Path) -> None:
    created = prepare_output(tmp_path / "a" / "b")
    assert created == [tmp_path / "a", tmp_path / "a" / "b"]
    assert list((tmp_path / "a" / "b").iterdir()) == []  # the write check leaves no file
    assert prepare_output(tmp_path / "a" / "b") == []


def test_remove_created_keeps_what_others_wrote(tmp_path: Path) -> None:
    created = prepare_output(tmp_path / "a" / "b")
    (tmp_path / "a" / "other").write_text("not ours")
    remove_created(created)
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["other"]


def test_output_through_a_dangling_symlink(tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to(tmp_path / "missing")
    with pytest.raises(OutputError, match="is not a directory"):
        prepare_output(tmp_path / "link" / "out")
    assert not (tmp_path / "missing").exists()


def test_remove_tree_if_new(tmp_path: Path) -> None:
    (tmp_path / "d" / "x").mkdir(parents=True)
    remove_tree_if_new(tmp_path / "d", existed=True)
    assert (tmp_path / "d" / "x").exists()
    remove_tree_if_new(tmp_path / "d", existed=False)
    assert not (tmp_path / "d").exists()


def test_check_input_needs_data_files_in_both_tables(tmp_path: Path) -> None:
    for table in ("events", "epochs"):
        (tmp_path / table / "part").mkdir(parents=True)
    (tmp_path / "events" / "part" / "x.parquet").write_bytes(b"")
    with pytest.raises(DatasetError) as caught:
        check_input(tmp_path)
    assert caught.value.remark == f"malformed dataset {tmp_path}: {tmp_path}/epochs holds no *.jsonl or *.parquet file"
    (tmp_path / "epochs" / "e.jsonl").write_text("")
    check_input(tmp_path)


def test_check_input_on_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(DatasetError, match="it is not a directory"):
        check_input(tmp_path / "f")


def test_dataset_bytes_counts_the_data_files_of_both_tables(tmp_path: Path) -> None:
    """What decides a small input's driver settings (spark_reports.session.SessionOptions.small_input)."""
    (tmp_path / "events" / "day=1").mkdir(parents=True)
    (tmp_path / "epochs").mkdir()
    (tmp_path / "events" / "day=1" / "a.jsonl").write_bytes(b"x" * 100)
    (tmp_path / "events" / "b.parquet").write_bytes(b"x" * 20)
    (tmp_path / "epochs" / "c.jsonl").write_bytes(b"x" * 3)
    (tmp_path / "epochs" / "notes.txt").write_bytes(b"x" * 1000)  # not data
    assert dataset_bytes(tmp_path) == 123
