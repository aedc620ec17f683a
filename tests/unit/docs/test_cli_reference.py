from __future__ import annotations

from pathlib import Path

from mqctl.docgen import generate, updated

ROOT = Path(__file__).resolve().parents[3]


def test_every_commands_help_in_cli_md_is_up_to_date() -> None:
    current = (ROOT / "docs" / "cli.md").read_text()
    assert updated(current) == current, "docs/cli.md's generated section is stale: run 'python -m mqctl.docgen'"


def test_every_command_has_examples() -> None:
    text = generate()
    sections = text.split("\n### ")[1:]
    missing = [s.splitlines()[0] for s in sections if "Examples:" not in s and "cluster" not in s.splitlines()[0]]
    assert not missing, f"commands without examples in their help: {missing}"
