from __future__ import annotations

from pathlib import Path

from mqctl.docgen import generate

ROOT = Path(__file__).resolve().parents[3]


def test_cli_reference_is_up_to_date() -> None:
    current = (ROOT / "docs" / "cli-reference.md").read_text()
    assert current == generate(), "docs/cli-reference.md is stale: run 'python -m mqctl.docgen > docs/cli-reference.md'"


def test_every_command_has_examples() -> None:
    text = generate()
    sections = text.split("\n## ")[1:]
    missing = [s.splitlines()[0] for s in sections if "Examples:" not in s and "cluster" not in s.splitlines()[0]]
    assert not missing, f"commands without examples in their help: {missing}"
