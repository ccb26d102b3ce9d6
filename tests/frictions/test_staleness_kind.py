"""A delay with no kind is an error naming the kinds, never a silent synchronous run (issue 12)."""

from __future__ import annotations

import pytest

from sandbox.frictions.staleness import DelaySchedule


def test_delay_without_a_kind_is_an_error_naming_the_kinds():
    with pytest.raises(ValueError, match=r"staleness D=8 needs a kind: .*fixed, uniform, geometric, per_actor"):
        DelaySchedule(D=8)
    with pytest.raises(ValueError, match="needs a kind"):
        DelaySchedule(kind="none", D=1)


def test_no_delay_and_explicit_kinds_are_fine():
    assert DelaySchedule().max_delay == 0 and DelaySchedule(kind="none", D=0).delay(10, 0) == 0
    assert DelaySchedule(kind="fixed", D=8).delay(10, 0) == 8
