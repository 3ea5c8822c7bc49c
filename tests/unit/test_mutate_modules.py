"""`make mutate`'s table of modules names files and tests that exist.

`make mutate` is not run in CI, so a covering test renamed without its line in `tools/mutate.py`
would only show when someone next runs it (its baseline then fails: the module is not tested at
all). This reads the table the way pytest would resolve it: every module path is a file, every
test path a file, every `::name` a test function defined at that file's top level.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _modules() -> dict[str, tuple[str, list[str]]]:
    spec = importlib.util.spec_from_file_location("mutate_tool", ROOT / "tools" / "mutate.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool.MODULES


MODULES = _modules()


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_mutated_module_and_covering_test_exists(name: str) -> None:
    module, tests = MODULES[name]
    assert (ROOT / module).is_file(), f"{name}: no module {module}"
    assert tests, f"{name}: no covering tests"
    for test in tests:
        path, _, function = test.partition("::")
        assert (ROOT / path).is_file(), f"{name}: no test file {path}"
        if function:
            assert function in _functions(ROOT / path), f"{name}: {path} defines no test {function}"
