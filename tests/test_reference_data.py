"""The committed curves of the reference code (simulations/data/egg_reversal_*.csv), and the
paper-tier plans that share runs between figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simulations import select
from simulations.reference import (
    BAND,
    CONFIGS,
    REFERENCE_DATA,
    REFERENCE_FRICTIONS,
    REFERENCE_METHODS,
    mean_reward,
    reference_curves,
    steps_to_reward,
)


def test_reference_data_loads_with_provenance_and_both_methods():
    header = [line for line in REFERENCE_DATA.read_text().splitlines() if line.startswith("#")]
    text = "\n".join(header)
    assert "egg" in text and "commit" in text and "command" in text
    frame = reference_curves()
    assert set(frame["method"]) == set(REFERENCE_METHODS.values()) == {"PG", "DG"}
    for method, group in frame.groupby("method"):
        assert group["seed"].nunique() >= 5, method
        steps = group.pivot(index="seed", columns="step", values="learner_reward")
        assert not steps.isna().any().any(), f"{method}: every seed is logged at the same steps"
    assert frame["learner_reward"].between(0, 1).all()


def test_steps_to_reward_interpolates_and_censors():
    frame = pd.DataFrame({"seed": [0, 0, 0, 1, 1, 1], "step": [10, 20, 40] * 2,
                          "learner_reward": [0.5, 0.9, 1.0, 0.5, 0.6, 0.7]})
    out = steps_to_reward(frame, "learner_reward")
    # seed 0 crosses 0.95 halfway (in log steps) between 20 and 40; seed 1 never: the last step
    assert np.allclose(out, [np.sqrt(20 * 40), 40])


def test_bad_reference_files_raise(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        reference_curves(tmp_path / "missing.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("# a comment\nmethod,seed,step,reward\ndg,0,10,0.5\n")
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['learner_reward'\]"):
        reference_curves(bad)
    bad.write_text("method,seed,step,reward,learner_reward\nppo,0,10,0.5,0.5\n")
    with pytest.raises(ValueError, match="method must be one of"):
        reference_curves(bad)


@pytest.mark.skipif(not REFERENCE_FRICTIONS.is_file(), reason="the reference's friction curves are not committed yet")
def test_the_friction_curves_hold_every_configuration_with_a_friction_free_evaluation():
    header = "\n".join(line for line in REFERENCE_FRICTIONS.read_text().splitlines() if line.startswith("#"))
    assert "egg" in header and "commit" in header
    frame = reference_curves(REFERENCE_FRICTIONS)
    assert set(frame["config"]) == set(CONFIGS) - {"clean"}
    seeds = frame.groupby(["config", "method"]).seed.nunique()
    assert (seeds.xs("DG", level="method") >= 10).all() and (seeds.xs("PG", level="method") >= 20).all()
    assert frame.clean_learner_reward.notna().all() and frame.step.max() == 600


def test_mean_reward_is_the_area_under_the_curve_over_the_window():
    frame = pd.DataFrame({"seed": [0] * 3 + [1] * 3, "step": [10, 20, 30] * 2,
                          "r": [0.0, 1.0, 1.0, 0.5, 0.5, np.nan]})
    got = mean_reward(frame, "r", (10, 30))
    assert got.loc[0] == pytest.approx((0.5 * 10 + 1.0 * 10) / 20) and np.isnan(got.loc[1])  # a diverged seed stays NaN
    with pytest.raises(ValueError, match="window"):
        mean_reward(frame, "r", (10, 40))
    assert 0 < BAND < 0.5


def test_paper_figures_share_the_runs_they_have_in_common():
    """reference-match's clean runs are reversal-learning's; its friction runs at the frictions
    figure's strengths are that figure's and the actor-bug map's penalty-free cells: one job each."""
    ids = {f.name: {j.id for j in f.jobs("paper")} for f in select(["sequences"])}
    learning = {j.id for j in select(["reversal-learning"])[0].jobs("paper") if j.label in ("PG", "DG")}
    assert len(learning) == 20 and learning <= ids["reference-match"]
    shared = ids["reference-match"] & ids["frictions"]
    assert len(shared) == 4 * 2 * 8  # four configurations × PG, DG × the frictions figure's 8 seeds
    assert len(ids["actor-bug-map"] & ids["frictions"]) == 2 * 2 * 8  # p_bug 0.1 and 0.3 without a penalty
