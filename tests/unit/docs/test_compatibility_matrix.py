"""docs/compatibility.md is a tested matrix: every row of a table with a "Verified against" column fills it and
names its tests, and every test it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "compatibility.md"
CITED = re.compile(r"`(tests/[\w/]+\.py)::(\w+)")


def tables() -> list[tuple[list[str], list[list[str]]]]:
    """Each table of the page: its header cells and its rows' cells."""
    found: list[tuple[list[str], list[list[str]]]] = []
    current: list[list[str]] = []
    for line in [*DOC.read_text(encoding="utf-8").splitlines(), ""]:
        if line.startswith("|"):
            current.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
        elif current:
            found.append((current[0], current[2:]))
            current = []
    return found


def test_every_row_of_a_verified_table_says_against_what_and_by_which_test() -> None:
    checked = 0
    for header, rows in tables():
        if "Verified against" not in header:
            continue
        for row in rows:
            assert len(row) == len(header), f"a row has {len(row)} cells, its table {len(header)}: {row[0][:80]}"
            verified, test = row[header.index("Verified against")], row[header.index("Test")]
            assert verified, f"no 'Verified against' for: {row[0][:80]}"
            assert test == "none yet" or CITED.search(test), f"no test named for: {row[0][:80]}"
            checked += 1
    assert checked > 50


def test_every_cited_test_exists() -> None:
    missing = []
    for path, name in sorted(set(CITED.findall(DOC.read_text(encoding="utf-8")))):
        source = ROOT / path
        if not source.is_file() or not re.search(rf"def {name}\b", source.read_text(encoding="utf-8")):
            missing.append(f"{path}::{name}")
    assert not missing, f"compatibility.md names tests that do not exist: {missing}"
