"""Early warning beyond the configuration (simulations.cases.warning_config) on hand-made runs:
the leave-one-run-out configuration baseline, the within-configuration AUC against its definition,
a configuration-only signal that cannot beat the baseline and one that does, and an alarm's
uncapped lead and false alarms per calm step."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from simulations.cases.warning import observations
from simulations.cases.warning_config import baseline_score, compare, run_weights, uncapped

STEPS = np.arange(0, 110, 10)
COLLAPSES = [0.8, 0.5, 0.2, 0.1, 0.1, 0.1, 0.6, 0.7, 0.8, 0.8, 0.8]  # collapse at step 60
HOLDS = [0.8, 0.5, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]
HORIZON = 20  # a collapsed run: steps 0..50 observed, 40 and 50 positive; a calm one: 0..80, all negative


def runs(plan):
    """plan: [(job, error curve, signal), ...], one member each."""
    return pd.concat([pd.DataFrame({"step": STEPS, "seed": 0, "member": m, "job_id": job, "steps": 100, "error": e,
                                    "diverged": False, "sig": s}) for m, (job, e, s) in enumerate(plan)])


def test_the_baseline_is_each_configurations_share_of_positive_steps():
    """Job a: two collapsed runs and one calm; job b: one collapsed, one calm. A collapsed run has
    6 observations, 2 positive; a calm one 9, none positive."""
    flat = np.zeros(11)
    obs = observations(runs([("a", COLLAPSES, flat), ("a", COLLAPSES, flat), ("a", HOLDS, flat),
                             ("b", COLLAPSES, flat), ("b", HOLDS, flat)]), {"sig": 1}, HORIZON)
    per_run = [baseline_score(obs)[obs.run == i][0] for i in range(5)]
    assert per_run == pytest.approx([4 / 21, 4 / 21, 4 / 21, 2 / 15, 2 / 15])
    # its pooled AUC from the counts: a's 4 positives outrank b's 13 negatives, tie a's 17;
    # b's 2 positives tie b's 13 negatives and lose to a's 17: (4·13 + ½·4·17 + ½·2·13) / (6·30)
    v = compare(obs, "sig: level", run_weights(obs, resamples=20))
    assert v["baseline"][0] == pytest.approx((4 * 13 + 0.5 * 4 * 17 + 0.5 * 2 * 13) / (6 * 30))


def test_within_configuration_auc_pairs_positives_only_with_calm_steps_of_their_own_configuration():
    rng = np.random.default_rng(5)
    plan = [(job, curve, np.round(rng.normal(size=11), 1)) for job in "abc" for curve in (COLLAPSES, HOLDS) * 4]
    obs = observations(runs(plan), {"sig": 1}, HORIZON)
    s, y, config = obs.scores["sig: level"], obs.label, obs.runs["job_id"].to_numpy()[obs.run]
    pairs = [(s[i] > s[j]) + 0.5 * (s[i] == s[j]) for i, j in itertools.product(np.flatnonzero(y == 1),
                                                                                 np.flatnonzero(y == 0))
             if config[i] == config[j]]
    v = compare(obs, "sig: level", run_weights(obs, resamples=200))
    assert v["within"][0] == pytest.approx(np.mean(pairs))
    assert v["within"][1] <= v["within"][0] <= v["within"][2]


def test_a_signal_that_only_knows_the_configuration_does_not_beat_the_baseline_and_one_that_warns_does():
    """Job a collapses in 10 of 12 runs, job b in 2 of 12. 'lag' is 1 in a, 0 in b: a configuration
    signal (within AUC 0.5, no better than the baseline); 'spike' is high only at the positives."""
    lag = {"a": np.ones(11), "b": np.zeros(11)}
    spike = np.array([0, 0, 0, 0, 5, 6, 9, 9, 9, 9, 9.0])
    plan = [(job, curve, lag[job]) for job, k in (("a", 10), ("b", 2)) for curve in [COLLAPSES] * k + [HOLDS] * (12 - k)]
    frame = runs(plan)
    frame["spike"] = np.concatenate([spike if e[-1] == 0.8 else np.zeros(11) for _, e, _ in plan])
    obs = observations(frame, {"sig": 1, "spike": 1}, HORIZON)
    W = run_weights(obs, resamples=300)
    config = compare(obs, "sig: level", W)
    assert config["within"][0] == 0.5 and not config["warns"]
    assert config["difference"][0] <= 0.0
    warns = compare(obs, "spike: level", W)
    assert warns["pooled"][0] == 1.0 and warns["within"][0] == 1.0
    assert warns["warns"] and warns["difference"][1] > 0
    assert len(warns["values"]) == 12  # one placement difference per collapsed run


def test_the_same_generator_gives_the_same_weights():
    obs = observations(runs([("a", COLLAPSES, np.zeros(11)), ("a", HOLDS, np.zeros(11))]), {"sig": 1}, HORIZON)
    assert (run_weights(obs, seed=3, resamples=20) == run_weights(obs, seed=3, resamples=20)).all()


def test_uncapped_lead_counts_from_the_first_firing_before_the_collapse_and_false_alarms_per_calm_step():
    """Run 0 collapses at 60 with the alarm on from step 10: lead 50 (a horizon of 20 would see
    only 20). Run 1 holds: alarm on at 3 of its 9 calm steps; run 0's calm steps (0..30) have it
    on at 10, 20, 30: 6 of 13 calm steps in all."""
    obs = observations(runs([("a", COLLAPSES, np.zeros(11)), ("a", HOLDS, np.zeros(11))]), {"sig": 1}, HORIZON)
    on = np.zeros(obs.step.size, bool)
    on[(obs.run == 0) & (obs.step >= 10)] = True
    on[(obs.run == 1) & np.isin(obs.step, [0, 40, 80])] = True
    u = uncapped(obs, on, run_weights(obs, resamples=50))
    assert u["collapses"] == 1 and u["fired_before"] == 1 and u["lead"][0] == 50
    assert u["false_alarm"][0] == pytest.approx(6 / 13)
    assert math.isnan(uncapped(obs, np.zeros_like(on), run_weights(obs, resamples=5))["lead"][0])
