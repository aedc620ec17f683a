"""The CLI's table of which module holds which command (mqctl.commands.MODULE_OF), which lets a command
line import only the module of the command it runs, is the truth: every command of every module, each in
its own module, and nothing else."""

from __future__ import annotations

import importlib

from click.testing import CliRunner

from mqctl import commands
from mqctl.cli import PROTOCOLS, cli
from services.common import wire


def test_every_command_is_listed_with_its_module() -> None:
    found = {}
    for name in commands.__all__:
        for command in importlib.import_module(f"mqctl.commands.{name}").COMMANDS:
            assert command.name not in found, f"{command.name} is in {found.get(command.name)} and {name}"
            found[command.name] = name
    assert found == commands.MODULE_OF


def test_the_cli_spells_the_protocols_as_the_wire_does() -> None:
    assert PROTOCOLS == wire.PROTOCOLS


def test_a_command_answers_to_its_alias_and_is_listed_in_the_help() -> None:
    runner = CliRunner()
    by_alias = runner.invoke(cli, ["get-sync-state-set", "--help"])
    assert by_alias.exit_code == 0 and "getSyncStateSet [OPTIONS]" in by_alias.output
    listed = runner.invoke(cli, ["--help"]).output
    assert all(name in listed for name in commands.MODULE_OF)
