"""Notebooks execute side by side (``sandbox.notebooks``): each kernel gets its own settings, this
process's environment is never changed, one failing notebook does not stop the others."""

import os
import time

import pytest

from sandbox.notebooks import execute_notebook, execute_notebooks

NOTEBOOK = """# %%
import os, time, pathlib
start = time.time()
time.sleep(float(os.environ["NAP"]))
pathlib.Path(os.environ["OUT"]).write_text(f"{os.environ['WHO']} {start} {time.time()}")
# %%
assert os.environ["WHO"] != "broken", "a failing cell"
"""


def _notebook(tmp_path):
    source = tmp_path / "nb" / "tiny.py"
    source.parent.mkdir()
    source.write_text(NOTEBOOK)
    return source


def test_two_notebooks_run_side_by_side_with_their_own_settings(tmp_path):
    source = _notebook(tmp_path)
    calls = [lambda who=who: execute_notebook(source, None, {"WHO": who, "NAP": "3", "OUT": str(tmp_path / who)},
                                              progress=False)
             for who in ("a", "b", "broken")]
    before = dict(os.environ)
    results = execute_notebooks(calls, workers=2)
    assert dict(os.environ) == before  # the settings went to the kernels only
    assert [err is None for _, err, _ in results] == [True, True, False]
    assert "a failing cell" in str(results[2][1])
    spans = {}
    for who in ("a", "b", "broken"):
        name, start, end = (tmp_path / who).read_text().split()
        assert name == who  # each kernel saw its own WHO
        spans[who] = (float(start), float(end))
    (a0, a1), (b0, b1) = spans["a"], spans["b"]
    assert max(a0, b0) < min(a1, b1)  # a and b slept at the same time: two workers ran them together
    assert all(seconds > 3 for _, _, seconds in results)


def test_one_worker_runs_them_in_turn_and_workers_are_checked(tmp_path):
    order = []
    results = execute_notebooks([lambda: order.append(1), lambda: 1 / 0, lambda: order.append(3)], workers=1)
    assert order == [1, 3] and isinstance(results[1][1], ZeroDivisionError)
    with pytest.raises(ValueError, match="workers must be an int ≥ 1, got 0"):
        execute_notebooks([], workers=0)


def test_ctrl_c_in_one_notebook_stops_the_others(tmp_path):
    def interrupted():
        time.sleep(0.5)
        raise KeyboardInterrupt

    started = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        execute_notebooks([interrupted, lambda: time.sleep(6), lambda: time.sleep(6)], workers=2)
    assert time.perf_counter() - started < 5  # raised at once, without waiting for the others
