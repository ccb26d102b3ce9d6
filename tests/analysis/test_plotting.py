"""Method colours (one per method, the same in every process) and intervals of bounded metrics
kept within their range, said in the footer."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from sandbox.analysis.plotting import (
    METHOD_COLORS,
    band,
    bands_note,
    color,
    curve,
    plt,
    save_figure,
    within_range,
)
from sandbox.estimators import ESTIMATORS
from sandbox.scoring.recipes import RECIPES


def test_every_registered_method_and_recipe_has_its_own_colour():
    builtin = [n for n in ESTIMATORS.names() if ESTIMATORS.get(n).__module__.startswith("sandbox.")]  # no plugins
    names = sorted(set(builtin) | set(RECIPES))
    missing = [n for n in names if n not in METHOD_COLORS]
    assert not missing, f"no colour in METHOD_COLORS for {missing}"
    colours = {n: color(n) for n in names}
    shared = {c: [n for n in names if colours[n] == c] for c in set(colours.values())}
    assert all(len(v) == 1 for v in shared.values()), {c: v for c, v in shared.items() if len(v) > 1}
    assert color("DPPO (ε=0.2)") != color("VESPO")  # drawn in one colour before issue 26


def test_a_method_without_an_entry_gets_the_same_colour_in_every_process():
    script = "from sandbox.analysis.plotting import color; print(color('my_plugin_pg'))"
    seen = {subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONHASHSEED": seed},
                           capture_output=True, text=True, check=True).stdout for seed in ("1", "2")}
    assert seen == {color("my_plugin_pg") + "\n"}


def test_intervals_are_kept_within_the_metric_range_and_the_footer_says_so(tmp_path, monkeypatch):
    monkeypatch.delenv("SANDBOX_CLAIMS", raising=False)
    fig, ax = plt.subplots()
    low, high = within_range(fig, np.array([-0.05, 0.2]), np.array([0.3, 0.4]), "error")
    assert low.tolist() == [0.0, 0.2] and high.tolist() == [0.3, 0.4]
    assert within_range(fig, np.array([0.5]), np.array([1.042]), (-1, 1))[1].tolist() == [1.0]
    assert bands_note(fig) == "intervals clipped to the metric's range [-1, 1], [0, 1]"
    unclipped, _ = plt.subplots()
    within_range(unclipped, [0.1], [0.9], "error")
    assert bands_note(unclipped) is None  # nothing crossed: nothing to say
    with pytest.raises(ValueError, match="bounds must be \\(low, high\\) or one of"):
        within_range(fig, [0.0], [1.0], "percent")
    plt.close("all")


def test_band_and_curve_clip_what_they_draw(tmp_path, monkeypatch):
    monkeypatch.delenv("SANDBOX_CLAIMS", raising=False)
    rng = np.random.default_rng(0)
    errors = np.clip(rng.normal(0.02, 0.05, (4, 5)), 0, 1)  # near 0: a t-interval reaches below it
    fig, axes = plt.subplots(1, 2)
    band(axes[0], np.arange(5), errors, "dg", bounds="error")
    curve(axes[1], [1.0, 2.0], errors[:, :2], "dppo", bounds="error")
    assert min(p.vertices[:, 1].min() for p in axes[0].collections[0].get_paths()) >= 0.0
    assert bands_note(fig) == "bands: 95% t-intervals of the mean over 4 seeds, intervals clipped to the metric's range [0, 1]"
    save_figure(fig, "clipped", tmp_path, note="fidelity=quick")
    assert fig.texts[-1].get_text() == ("fidelity=quick, bands: 95% t-intervals of the mean over 4 seeds, intervals "
                                        "clipped to the metric's range [0, 1]")
    plt.close("all")
