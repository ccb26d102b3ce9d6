"""Exact bandit probes: identities (sanity checks), the bound s ∈ [0, 1], and divergence."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch

from sandbox import Estimator, PGTerms, register_estimator
from sandbox.estimators import ESTIMATORS, make_estimator
from sandbox.scoring.probes import instance, probe_metrics, run_probe
from sandbox.scoring.runner import score_cell

#: a probe cell as the runner passes it (``Cell.to_dict()``)
CELL = {"name": "b", "env": "bandit", "friction": "actor bug", "kind": "probe", "seeds": 3,
        "metric": "signal_fraction", "random": 0.0, "best": 1.0,
        "probe": {"K": 5, "B": 10, "p_correct": 0.9, "actor": "point_mass", "rho": 0.1}}


def _recipe(name: str, estimator: str) -> dict:
    return {"name": name, "estimator": estimator, "estimator_kwargs": {}, "advantage": None,
            "advantage_kwargs": {}, "controllers": []}


def _instances(actor: str, p_correct: float, n: int = 5):
    return [instance(10, p_correct, actor, 0.1, 0.5, torch.Generator().manual_seed(s)) for s in range(n)]


def test_instance_has_the_requested_policy_and_actor():
    z, y, mu = instance(10, 0.99, "point_mass", 0.1, 0.5, torch.Generator().manual_seed(0))
    pi = torch.softmax(z, -1)
    assert pi[y] == pytest.approx(0.99) and mu.sum() == pytest.approx(1.0)
    wrong = int(torch.argmax(mu - 0.9 * pi))  # the arm the bug injects
    assert wrong != y and mu[wrong] == pytest.approx(0.9 * pi[wrong] + 0.1)
    _, y, mu = instance(10, 0.01, "discovery", 0.1, 0.5, torch.Generator().manual_seed(0))
    assert mu[y] == pytest.approx(0.9 * 0.01 + 0.1)


@pytest.mark.parametrize("name, actor", [("reinforce", "on_policy"), ("is_pg", "point_mass"), ("is_pg", "stale")])
def test_unbiased_estimators_align_exactly(name, actor):
    """Sanity checks (identities): REINFORCE on-policy and exact IS off-policy are unbiased, so
    their expected update is parallel to ∇J."""
    for z, y, mu in _instances(actor, 0.9):
        m = probe_metrics(make_estimator(name), z, y, mu, B=100)
        assert m["cos"] == pytest.approx(1.0, abs=1e-9)
        assert 0 < m["signal_fraction"] <= 1


def test_signal_fraction_tends_to_the_squared_cosine_for_large_batches():
    for z, y, mu in _instances("stale", 0.9):
        m = probe_metrics(make_estimator("dg"), z, y, mu, B=10**12)
        assert m["signal_fraction"] == pytest.approx(max(m["cos"], 0) ** 2, rel=1e-6)


def test_dg_keeps_more_signal_than_pg_under_rare_failures():
    """The probe separates estimators: DG gates out the rare failures' perpendicular noise (exact,
    every instance)."""
    for z, y, mu in _instances("point_mass", 0.99):
        dg = probe_metrics(make_estimator("dg"), z, y, mu, B=100)
        pg = probe_metrics(make_estimator("reinforce"), z, y, mu, B=100)
        assert dg["perp_moment"] < 0.01 * pg["perp_moment"]
        assert dg["signal_fraction"] > pg["signal_fraction"]


@dataclass(frozen=True)
class NaNPG(Estimator):
    """Returns NaN losses: a diverged estimator (registered only inside its test, so that the
    estimator-wide tests never meet it)."""

    def token_loss(self, t: PGTerms):
        return t.logp * float("nan")


def test_a_nan_estimator_is_a_diverged_seed_scoring_zero():
    register_estimator("probe_nan_pg")(NaNPG)
    try:
        cell = CELL
        recipe = _recipe("nan", "probe_nan_pg")
        frame = score_cell(cell, recipe, seed=0)
        assert frame["diverged"].all() and (frame["score"] == 0).all() and frame["value"].map(math.isnan).all()
        ok = run_probe(cell, {**recipe, "estimator": "reinforce"}, 0, 3)
        assert not ok["diverged"].any() and ok["value"].between(0, 1).all()
        assert "probe_nan_pg" in ESTIMATORS
    finally:
        ESTIMATORS._entries.pop("probe_nan_pg", None)


@pytest.mark.parametrize("kwargs, message", [
    ({"actor": "gremlin"}, "actor must be one of"), ({"p_correct": 1.0}, "p_correct"), ({"K": 1}, "K"),
])
def test_instance_rejects_bad_settings(kwargs, message):
    args = {"K": 10, "p_correct": 0.5, "actor": "stale", "rho": 0.1, "p_actor": 0.5, **kwargs}
    with pytest.raises(ValueError, match=message):
        instance(generator=torch.Generator().manual_seed(0), **args)


def test_estimators_that_draw_random_numbers_are_probed_not_diverged():
    """clip_cov draws its zeroed tokens from the terms' generator: the probe supplies one per seed
    (before, its refusal of a missing generator was scored as a diverged seed); same seed, same value."""
    cell = CELL
    recipe = _recipe("clip_cov", "clip_cov")
    frame = run_probe(cell, recipe, 0, 3)
    assert not frame["diverged"].any() and frame["value"].between(0, 1).all()
    assert frame["value"].equals(run_probe(cell, recipe, 0, 3)["value"])


@dataclass(frozen=True)
class RefusingPG(Estimator):
    """Raises on every batch (a stand-in for an estimator's own input check); registered only for
    the test that needs it, so that no other test meets it in the registry."""

    def token_loss(self, t: PGTerms):
        raise ValueError("probe_refusing_pg refuses every batch (as if its settings held NaN or inf)")


def test_an_estimator_error_other_than_non_finite_input_is_raised():
    """Only non-finite inputs (the type ``NonFiniteError``, whatever a message says) count as
    divergence; any other refusal is an error, not a score of 0."""
    register_estimator("probe_refusing_pg")(RefusingPG)
    try:
        cell = {**CELL, "seeds": 1}
        recipe = _recipe("refuses", "probe_refusing_pg")
        with pytest.raises(ValueError, match="refuses every batch"):
            run_probe(cell, recipe, 0, 1)
    finally:
        ESTIMATORS._entries.pop("probe_refusing_pg", None)
