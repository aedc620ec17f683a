"""Each package says what it offers in ``__all__``: its modules. Adding, renaming or removing one is a
change of the public surface, made on purpose (here), not by accident."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = sorted(".".join(p.parent.relative_to(ROOT).parts) for top in ("mqctl", "services", "spark_reports")
                  for p in (ROOT / top).rglob("__init__.py") if "__pycache__" not in p.parts)


def submodules(package: str) -> list[str]:
    directory = ROOT.joinpath(*package.split("."))
    return sorted(p.stem if p.suffix == ".py" else p.name for p in directory.iterdir()
                  if not p.name.startswith(("_", ".")) and (p.suffix == ".py" or (p / "__init__.py").exists()))


@pytest.mark.parametrize("package", PACKAGES)
def test_all_names_every_module_of_the_package(package: str) -> None:
    module = importlib.import_module(package)
    assert sorted(module.__all__) == submodules(package)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_imports(package: str) -> None:
    for name in importlib.import_module(package).__all__:
        importlib.import_module(f"{package}.{name}")
