"""verl's documented alarms and their lead before a collapse (sandbox.analysis.alarms), by hand."""

import math

import numpy as np
import pandas as pd
import pytest

from sandbox.analysis.alarms import ALARMS, UNITS, alarm_table, warning_lead
from sandbox.diagnostics import SIGNALS

ESS, WEIGHT, KL = ALARMS


def test_each_alarm_fires_at_verls_thresholds_and_a_broken_metric_only_where_the_run_diverged():
    nan = math.nan
    assert ESS.on([0.5, 0.3, 0.29, nan, nan], [0, 0, 0, 1, 0]).tolist() == [False, False, True, True, False]
    assert WEIGHT.on([1.0, 0.49, 0.5, 2.0, 2.01]).tolist() == [False, True, False, False, True]
    assert KL.on([0.05, -0.2, 0.11, 0.1]).tolist() == [False, True, True, False]
    assert (ESS.verl, WEIGHT.verl, KL.verl) == ("rollout_corr/rollout_is_eff_sample_size",
                                                "rollout_corr/rollout_is_mean", "rollout_corr/kl")
    assert WEIGHT.trl == "sampling/importance_sampling_ratio/mean" and ESS.trl == "—"


def test_every_logged_signal_names_its_verl_and_trl_metric():
    assert set(SIGNALS) <= set(UNITS)


def test_the_lead_is_from_the_earliest_alarm_within_the_horizon_to_the_collapse():
    steps, on = [0, 10, 20, 30, 40, 50], [True, False, True, False, True, True]
    assert warning_lead(steps, on, 45, 30) == 25  # steps 15 ≤ t < 45: on at 20 and 40 → 45 − 20
    assert warning_lead(steps, on, 45, 10) == 5  # only 40 is within 10 steps
    assert warning_lead(steps, on, 45, 2) != warning_lead(steps, on, 45, 2)  # none within 2: NaN
    assert math.isnan(warning_lead(steps, on, None, 30))  # no collapse: nothing to warn of


def test_alarm_table_reads_each_run_collapse_first_firing_and_lead():
    steps = np.arange(0, 110, 10)
    collapses = [0.8, 0.5, 0.2, 0.1, 0.1, 0.1, 0.6, 0.7, 0.8, 0.8, 0.8]  # learns, collapses at step 60
    holds = [0.8, 0.5, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]
    ess_falls = [1, 1, 1, 1, 0.9, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1]  # below 0.3 from step 50
    frame = pd.concat([pd.DataFrame({"step": steps, "seed": 0, "member": m, "error": e, "ess_frac": ess_falls,
                                     "ratio_mean": 1.0, "kl_k1": 0.01}) for m, e in enumerate([collapses, holds])])
    table = alarm_table(frame, "error", horizon=20)
    assert table["collapse_step"].tolist()[0] == 60 and pd.isna(table["collapse_step"].tolist()[1])
    assert table["ESS < 0.3: first"].tolist() == [50.0, 50.0]
    assert table["ESS < 0.3: lead"].tolist()[0] == 10.0 and math.isnan(table["ESS < 0.3: lead"].tolist()[1])
    assert table["|KL| > 0.1: first"].isna().all()
    with pytest.raises(ValueError, match="horizon must be an int ≥ 1"):
        alarm_table(frame, "error", horizon=0)
