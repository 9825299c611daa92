"""The docstring examples of the library are run: a doc example that drifts from the code fails."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import ledger
import projections


def _modules() -> list[str]:
    names = []
    for package in (ledger, projections):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            names.append(info.name)
    return sorted(names)


MODULES = _modules()


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"


def test_there_are_examples() -> None:
    finder = doctest.DocTestFinder()
    count = sum(len(t.examples) for n in MODULES for t in finder.find(importlib.import_module(n)))
    assert count >= 40
