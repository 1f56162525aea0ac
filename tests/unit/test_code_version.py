"""The code version a plan records covers every source that decides: replay and snapshots
trust a plan or a state only from the same decision code."""

import pkgutil
from pathlib import Path

import allot.core
import allot.proto
from allot.services.runtime import decision_sources


def test_every_module_of_the_core_and_the_contracts_is_in_the_code_version() -> None:
    digested = {path.resolve() for _, path in decision_sources()}
    for package in (allot.core, allot.proto):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            spec = module.module_finder.find_spec(module.name.rsplit(".", 1)[1], None)
            assert spec is not None
            assert spec.origin is not None
            assert Path(spec.origin).resolve() in digested, module.name
