"""Early-warning statistics (simulations.cases.warning) on hand-made runs: the labels, the ROC AUC
against its definition, the run bootstrap, the rise score and an alarm's detection, lead and
false alarms."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from simulations.cases import warning
from simulations.cases.warning import alarm_metrics, auc, observations, roc_curve

STEPS = np.arange(0, 110, 10)
COLLAPSES = [0.8, 0.5, 0.2, 0.1, 0.1, 0.1, 0.6, 0.7, 0.8, 0.8, 0.8]  # collapse at step 60
HOLDS = [0.8, 0.5, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]


def runs(curves, signals, job="j"):
    return pd.concat([pd.DataFrame({"step": STEPS, "seed": 0, "member": m, "job_id": job, "steps": 100, "error": e,
                                    "diverged": False, "sig": s}) for m, (e, s) in enumerate(zip(curves, signals))])


def test_observations_label_the_steps_before_a_collapse_and_censor_the_end_of_a_run_that_holds():
    obs = observations(runs([COLLAPSES, HOLDS], [np.arange(11.0)] * 2), {"sig": 1}, horizon=20)
    first = obs.run == 0
    assert obs.step[first].tolist() == [0, 10, 20, 30, 40, 50]  # t < c = 60
    assert obs.label[first].tolist() == [0, 0, 0, 0, 1, 1]  # 40 ≤ t < 60
    assert obs.step[~first].tolist() == [0, 10, 20, 30, 40, 50, 60, 70, 80]  # t ≤ 100 − 20
    assert not obs.label[~first].any()


def test_auc_is_the_share_of_positive_negative_pairs_ordered_right_ties_half():
    rng = np.random.default_rng(3)
    signals = [np.round(rng.normal(size=11), 1) for _ in range(6)]
    obs = observations(runs([COLLAPSES, HOLDS] * 3, signals), {"sig": 1}, horizon=20)
    s, y = obs.scores["sig: level"], obs.label
    pairs = [(p > q) + 0.5 * (p == q) for p, q in itertools.product(s[y == 1], s[y == 0])]
    a = auc(obs, "sig: level")
    assert a["auc"] == pytest.approx(np.mean(pairs))
    assert math.isnan(a["low"])  # 3 collapsed runs: fewer than MIN_RUNS, no bootstrap
    fpr, tpr = roc_curve(obs, "sig: level")
    assert np.trapezoid(tpr, fpr) == pytest.approx(a["auc"])


def test_a_signal_that_rises_before_every_collapse_has_auc_one_and_a_bootstrap_interval_from_ten_runs():
    rising = np.array([0, 0, 0, 0, 5, 6, 9, 9, 9, 9, 9.0])  # high at 40 and 50, the positives
    flat = np.zeros(11)
    obs = observations(runs([COLLAPSES] * 10 + [HOLDS] * 10, [rising] * 10 + [flat] * 10), {"sig": 1}, horizon=20)
    a = auc(obs, "sig: level")
    assert a["auc"] == 1.0 and a["low"] == 1.0 and a["collapsed_runs"] == 10 and a["calm_runs"] == 10
    down = observations(runs([COLLAPSES] * 10 + [HOLDS] * 10, [rising] * 10 + [flat] * 10), {"sig": -1}, horizon=20)
    assert auc(down, "sig: level")["auc"] == 0.0  # declared the wrong way round: it warns the other way


def test_a_diverged_run_is_the_strongest_warning_and_an_unlogged_signal_is_left_out():
    frame = runs([COLLAPSES, HOLDS], [np.arange(11.0), np.full(11, np.nan)])
    frame.loc[(frame.member == 1) & (frame.step == 30), "diverged"] = True
    obs = observations(frame, {"sig": 1}, horizon=20)
    level = obs.scores["sig: level"][obs.run == 1]
    assert np.isinf(level[3]) and np.isnan(level[[0, 1, 2, 4]]).all()


def test_the_rise_is_a_z_score_against_the_runs_own_history():
    x = np.array([1, 2, 1, 2, 1, 10.0])
    z = warning._rise(x)
    assert np.isnan(z[:5]).all()
    assert z[5] == pytest.approx((10 - 1.4) / np.std([1, 2, 1, 2, 1], ddof=1))


def test_alarm_metrics_count_warned_collapses_their_lead_and_false_alarms_per_run():
    rising = np.array([0, 0, 0, 1, 5, 6, 9, 9, 9, 9, 9.0])
    obs = observations(runs([COLLAPSES, COLLAPSES, HOLDS], [rising, np.zeros(11), rising]), {"sig": 1}, horizon=20)
    m = alarm_metrics(obs, obs.raw["sig"] > 2, horizon=20)
    assert (m["collapses"], m["warned"]) == (2, 1)
    assert m["lead"][0] == 20  # on at 40, collapse at 60
    assert m["detection"][0] == 0.5
    # false alarms: run 0 none of 4 calm steps, run 1 none, run 2 on at 40–80 (5 of 9 calm steps)
    assert m["false_alarm_runs"].tolist() == pytest.approx([0.0, 0.0, 5 / 9])
