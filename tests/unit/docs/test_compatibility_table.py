"""docs/compatibility.md's table of request codes says exactly which codes the servers dispatch: read from
each server's route table in the source (``self._routes = {...}``), its keys evaluated in the module."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

from services.remoting.command import RequestCode

ROOT = Path(__file__).resolve().parents[3]
ROW = re.compile(r"^\| (\d+) \| `([A-Z0-9_]+)` \| (served|sent|—) \| (served|sent|—) \| (.*) \|$")


def table() -> dict[int, tuple[str, str, str]]:
    text = (ROOT / "docs" / "compatibility.md").read_text(encoding="utf-8")
    section = text[text.index("## Every request code"):]
    rows = {}
    for line in section.splitlines():
        match = ROW.match(line)
        if match:
            code = int(match.group(1))
            assert code not in rows, f"code {code} twice in the table"
            rows[code] = (match.group(2), match.group(3), match.group(4))
    return rows


def dispatched(module_name: str) -> set[int]:
    """The keys of the ``self._routes`` dict the module's server class builds."""
    module = importlib.import_module(module_name)
    tree = ast.parse(Path(module.__file__ or "").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, ast.AnnAssign) else []
        value = getattr(node, "value", None)
        if isinstance(value, ast.Dict) and any(isinstance(t, ast.Attribute) and t.attr == "_routes"
                                               for t in targets):
            return {int(eval(ast.unparse(key), vars(module))) for key in value.keys if key is not None}
    raise AssertionError(f"no _routes table in {module_name}")


def test_every_dispatched_code_is_marked_served_and_nothing_else_is() -> None:
    rows = table()
    controller = dispatched("services.controller.remoting")
    broker = dispatched("services.broker.remoting")
    assert {c for c, (_, who, _) in rows.items() if who == "served"} == controller
    assert {c for c, (_, _, who) in rows.items() if who == "served"} == broker


def test_the_table_names_codes_as_rocketmq_does_and_is_complete_for_ours() -> None:
    rows = table()
    assert list(rows) == sorted(rows) and len(rows) > 150  # RocketMQ's RequestCode, in order
    for code in RequestCode:
        assert rows[code.value][0] == code.name, code
