"""Generate docs/cli-reference.md from the click commands, so the reference cannot drift.

Run ``python -m mqctl.docgen > docs/cli-reference.md``; a test fails when the file is stale.
"""

from __future__ import annotations

import click

from mqctl.cli import cli, kebab


def _command_doc(name: str, command: click.Command, parent: click.Context) -> str:
    with click.Context(command, info_name=name, parent=parent, terminal_width=100, max_content_width=100) as ctx:
        help_text = command.get_help(ctx)
    alias = kebab(name) if kebab(name) != name else None
    title = f"## `{parent.info_name} {name}`" + (f" (alias `{alias}`)" if alias else "")
    parts = [title, "", "```text", help_text.rstrip(), "```", ""]
    if isinstance(command, click.Group):
        for sub_name in command.list_commands(ctx):
            sub = command.get_command(ctx, sub_name)
            if sub is not None:
                parts.append(_command_doc(sub_name, sub, ctx).replace("## ", "### ", 1))
    return "\n".join(parts)


def generate() -> str:
    with click.Context(cli, info_name="mqctl", terminal_width=100, max_content_width=100,
                       help_option_names=["-h", "--help"]) as root:
        lines = ["# CLI reference", "",
                 "Generated from the command definitions by `python -m mqctl.docgen`; do not edit by hand.",
                 "Formats, JSON shapes and exit codes are described in `docs/cli.md`.", "",
                 "```text", cli.get_help(root).rstrip(), "```", ""]
        for name in cli.list_commands(root):
            command = cli.get_command(root, name)
            if command is not None and not command.hidden:
                lines.append(_command_doc(name, command, root))
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(generate(), end="")
