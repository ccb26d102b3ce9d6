"""The committed curves of the reference code (simulations/data/egg_reversal_h10.csv)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simulations.sequences import (
    REFERENCE_DATA,
    REFERENCE_METHODS,
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
        steps = group.pivot_table(index="seed", columns="step", values="learner_reward")
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
