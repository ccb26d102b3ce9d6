"""verl's advantage estimators (``core_algos``, called as ``compute_advantage`` calls them) beside
the advantage ``sandbox check`` maps them to, on identical rewards (docs/conformance.md)."""

from __future__ import annotations

import pytest
import torch

from .required import require

require("verl.trainer.ppo.core_algos")

from .harness import AGREED, TOL, make_batch, mapped, our_advantages  # noqa: E402
from .verl_side import G, R, verl_advantages  # noqa: E402

#: mapped estimators (with the std switch where verl reads it)
MAPPED = {
    "grpo": {}, "grpo-no-std": {"adv_estimator": "grpo", "norm_adv_by_std_in_grpo": False},
    "grpo_vectorized": {}, "grpo_vectorized-no-std": {"adv_estimator": "grpo_vectorized",
                                                      "norm_adv_by_std_in_grpo": False},
    "rloo": {}, "rloo_vectorized": {},
}
#: mapped to ours, whose whitening differs by Bessel's correction (D3)
WHITENED = ("reinforce_plus_plus", "reinforce_plus_plus_baseline")
#: registered at verl 0.9.1 and refused by the check
REFUSED = {"gae", "remax", "opo", "grpo_passk", "gpg", "optimal_token_baseline", "tir_optimal_token_baseline", "gdpo"}


def _config(case: str, n: int = 4) -> dict:
    keys = MAPPED[case] or {"adv_estimator": case}
    return {f"{G}{k}": v for k, v in keys.items()} | {R + "n": n}


@pytest.mark.parametrize("batch", AGREED)
@pytest.mark.parametrize("case", sorted(MAPPED))
def test_advantage_agrees(case, batch):
    config = _config(case)
    b = make_batch(batch)
    ours, theirs = our_advantages(mapped(config), b), verl_advantages(config, b)
    torch.testing.assert_close(ours, theirs, rtol=TOL, atol=TOL, msg=f"verl {case} on {batch}")


@pytest.mark.parametrize("batch", ["random", "unequal", "masked"])
@pytest.mark.parametrize("name", WHITENED)
def test_reinforce_plus_plus_whitening_differs_by_bessel(name, batch):
    """D3: verl whitens REINFORCE++ over valid tokens with the unbiased variance (× N/(N−1)) and
    ε = 1e-8 inside the root; ours follows OpenRLHF (population variance): theirs = ours·√((N−1)/N)
    up to the ε's. The mapping keeps ours; the gap is 1/(2N) relative (N valid tokens)."""
    config = {G + "adv_estimator": name, R + "n": 4}
    b = make_batch(batch)
    ours, theirs = our_advantages(mapped(config), b), verl_advantages(config, b)
    n = int(b.mask.sum())
    torch.testing.assert_close(ours * ((n - 1) / n) ** 0.5, theirs, rtol=1e-5, atol=1e-5)
    assert float((ours - theirs).abs().max()) > 1e-4


def _singletons(batch):
    return batch.__class__(**{**batch.__dict__, "group": torch.arange(len(batch.group))})


@pytest.mark.parametrize("case", ["grpo", "grpo-no-std", "grpo_vectorized", "rloo"])
def test_groups_of_one_match_verl(case):
    """M3: ``rollout.n`` = 1 (verl's default) with a group baseline. verl's GRPO gives a singleton
    mean 0 and std 1 (A = R/(1 + 1e-6)), RLOO A = R; the mapping gives the baseline-free ``constant``
    (A = R), within 1e-6 of both, and says so in the table."""
    config = _config(case, n=1)
    b = _singletons(make_batch("random"))
    m = mapped(config)
    assert m.recipe.advantage == "constant"
    assert any("rollout.n" in r.key and "group of one" in r.note for r in m.rows)
    torch.testing.assert_close(our_advantages(m, b), verl_advantages(config, b), rtol=TOL, atol=TOL)


def test_rloo_vectorized_with_groups_of_one_is_refused():
    """D4: verl's ``rloo_vectorized`` gives a group of one A = 0 (``(c > 1)``), its ``rloo`` A = R:
    a run with ``rollout.n`` = 1 learns nothing, and the check refuses it."""
    config = _config("rloo_vectorized", n=1)
    assert float(verl_advantages(config, _singletons(make_batch("random"))).abs().max()) == 0.0
    with pytest.raises(ValueError, match="rollout.n"):
        mapped(config)


def test_every_registered_estimator_is_mapped_or_refused():
    from verl.trainer.ppo.core_algos import AdvantageEstimator

    names = {e.value for e in AdvantageEstimator}
    assert names == {c for c in MAPPED if "-" not in c} | REFUSED | set(WHITENED)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_unmapped_estimators_are_refused(name):
    with pytest.raises(ValueError, match="adv_estimator"):
        mapped({G + "adv_estimator": name, R + "n": 4})
