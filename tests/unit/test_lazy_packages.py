"""``allot.core`` and ``allot.bus`` load each name's module when first used: what type
checkers read (the imports under ``TYPE_CHECKING``), what runs (``_NAMES``) and what the
package exports (``__all__``) must name the same things, each the object its module has."""

import ast
import importlib
from pathlib import Path
from types import ModuleType

import pytest

import allot.bus
import allot.core


def checked_imports(package: ModuleType) -> dict[str, tuple[str, ...]]:
    """module -> names, as the package's ``if TYPE_CHECKING:`` block imports them."""
    assert package.__file__ is not None
    tree = ast.parse(Path(package.__file__).read_text())
    [block] = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    ]
    found: dict[str, tuple[str, ...]] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom)
        assert node.module is not None
        found[node.module] = found.get(node.module, ()) + tuple(a.name for a in node.names)
    return found


@pytest.mark.parametrize("package", [allot.core, allot.bus], ids=lambda p: p.__name__)
def test_what_is_checked_runs_and_is_exported(package: ModuleType) -> None:
    names = package._NAMES
    assert checked_imports(package) == names
    assert sorted(package.__all__) == sorted(n for found in names.values() for n in found)
    for module, found in names.items():
        for name in found:
            assert getattr(package, name) is getattr(importlib.import_module(module), name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        allot.core.nothing_here  # noqa: B018
