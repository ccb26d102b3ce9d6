"""``require(module)``: a framework the conformance suite needs, imported, or the module skipped by an
explicit switch, or a failure (conftest.py says which switches)."""

from __future__ import annotations

import importlib
import os

import pytest

CONFIG: list = []  # the run's pytest config (conftest.py's pytest_configure)


def selected() -> bool:
    """Whether the run's ``-m`` expression keeps tests marked ``conformance`` (no expression: yes)."""
    from _pytest.mark.expression import Expression

    expr = CONFIG[0].option.markexpr if CONFIG else ""
    return not expr or Expression.compile(expr).evaluate(lambda name, **_: name == "conformance")


def require(module: str):
    """``module`` imported — or this test module skipped when the run deselects the suite or sets
    ``SANDBOX_CONFORMANCE=skip``, and failed (not skipped) when the framework is missing."""
    if not selected():
        pytest.skip("the conformance suite is deselected (-m 'not conformance', pyproject.toml addopts); run it with "
                    "python -m pytest tests/conformance -m conformance", allow_module_level=True)
    if os.environ.get("SANDBOX_CONFORMANCE", "").strip().lower() == "skip":
        pytest.skip("SANDBOX_CONFORMANCE=skip", allow_module_level=True)
    try:
        return importlib.import_module(module)
    except ImportError as err:
        pytest.fail(f"{module} cannot be imported ({type(err).__name__}: {err}): the conformance suite needs it; "
                    "install what docs/conformance.md lists, or skip the suite explicitly "
                    "(SANDBOX_CONFORMANCE=skip, or -m 'not conformance')", pytrace=False)
