"""verl's registered policy losses and aggregation modes beside the estimator ``sandbox check`` maps
them to, on identical float64 batches (docs/conformance.md, docs/check.md's verl table)."""

from __future__ import annotations

import pytest

from .required import require

require("verl.trainer.ppo.core_algos")

from .harness import AGREED, assert_agree, differ, make_batch, mapped, our_loss  # noqa: E402
from .verl_side import A, verl_loss  # noqa: E402

AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
BASE = {"algorithm.adv_estimator": "grpo", "actor_rollout_ref.rollout.n": 4}
#: one config per registered loss mode the check maps, with non-default knobs where it has them
LOSSES = {
    "vanilla": {A + "clip_ratio_low": 0.2, A + "clip_ratio_high": 0.28},
    "vanilla-dual-clip-10": {A + "clip_ratio_low": 0.2, A + "clip_ratio_high": 0.28, A + "clip_ratio_c": 10.0},
    "vanilla-clip-ratio": {A + "clip_ratio": 0.3, A + "clip_ratio_low": None, A + "clip_ratio_high": None},
    "gspo": {A + "policy_loss.loss_mode": "gspo", A + "clip_ratio_low": 3e-4, A + "clip_ratio_high": 4e-4},
    "geo_mean": {A + "policy_loss.loss_mode": "geo_mean", A + "clip_ratio_low": 0.4, A + "clip_ratio_high": 0.4},
    "cispo": {A + "policy_loss.loss_mode": "cispo", A + "clip_ratio_low": 10.0, A + "clip_ratio_high": 0.2},
    "sapo": {A + "policy_loss.loss_mode": "sapo", A + "tau_pos": 1.0, A + "tau_neg": 1.05},
    "sapo-hot": {A + "policy_loss.loss_mode": "sapo", A + "tau_pos": 3.0, A + "tau_neg": 0.5},
    "clip_cov": {A + "policy_loss.loss_mode": "clip_cov", A + "policy_loss.clip_cov_ratio": 1.0,
                 A + "policy_loss.clip_cov_lb": -1.0, A + "policy_loss.clip_cov_ub": 0.05},
    "kl_cov": {A + "policy_loss.loss_mode": "kl_cov", A + "policy_loss.kl_cov_ratio": 0.2,
               A + "policy_loss.ppo_kl_coef": 0.1},
    "gpg": {A + "policy_loss.loss_mode": "gpg"},
}
#: registered at verl 0.9.1 and refused by the check (docs/conformance.md says why)
REFUSED = {"dppo_tv", "dppo_kl", "dro"}


def _config(loss: str, aggregation: str) -> dict:
    return {**BASE, **LOSSES[loss], A + "loss_agg_mode": aggregation}


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
@pytest.mark.parametrize("loss", sorted(LOSSES))
@pytest.mark.parametrize("batch", AGREED)
def test_policy_loss_agrees(loss, aggregation, batch):
    config = _config(loss, aggregation)
    b = make_batch(batch)
    assert_agree(our_loss(mapped(config), b), verl_loss(config, b), f"verl {loss} {aggregation} on {batch}")


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_policy_loss_on_an_empty_answer(loss):
    """An answer with every token masked: verl leaves it out of every mean but ``geo_mean``'s
    ``torch.mean`` over all sequences; ours leaves it out always (docs/conformance.md, D2)."""
    config = _config(loss, "seq-mean-token-mean")
    b = make_batch("empty_row")
    ours, theirs = our_loss(mapped(config), b), verl_loss(config, b)
    if loss == "geo_mean":
        n, n_valid = b.mask.shape[0], int(b.mask.any(-1).sum())
        assert differ(ours, theirs) > 1e-3
        assert_agree((ours[0] * n_valid / n, ours[1] * n_valid / n), theirs, "geo_mean rescaled by B_valid/B")
    else:
        assert_agree(ours, theirs, f"verl {loss} with an empty answer")


def test_every_registered_loss_is_mapped_or_refused():
    from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY

    assert set(POLICY_LOSS_REGISTRY) == set(LOSSES_BY_MODE) | REFUSED | {"bypass_mode"}


LOSSES_BY_MODE = {config.get(A + "policy_loss.loss_mode", "vanilla") for config in LOSSES.values()}


@pytest.mark.parametrize("mode", sorted(REFUSED))
def test_unmapped_losses_are_refused(mode):
    with pytest.raises(ValueError, match="loss_mode"):
        mapped({**BASE, A + "policy_loss.loss_mode": mode})


@pytest.mark.parametrize("loss", ["sapo", "geo_mean", "gspo"])
@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean-token-sum"])
def test_fixed_aggregations_ignore_loss_agg_mode(loss, aggregation):
    """M5: verl's sapo (``seq-mean-token-mean`` hard-coded) and geo_mean (``torch.mean`` over
    sequences) ignore ``loss_agg_mode``; the mapping fixes the estimator's aggregation to match,
    and the table says so. (gspo does read it at 0.9.1.)"""
    config = _config(loss, aggregation)
    m = mapped(config)
    b = make_batch("unequal")
    assert_agree(our_loss(m, b), verl_loss(config, b), f"verl {loss} with loss_agg_mode={aggregation}")
    expected = aggregation if loss == "gspo" else "seq-mean-token-mean"
    assert m.recipe.estimator_kwargs["aggregation"] == expected


def test_clip_cov_draws_the_same_number_of_tokens():
    """D7: clip_cov zeroes ⌊ratio·n⌋ (≥ 1) of its eligible tokens drawn at random — verl with the
    global ``torch.randperm``, ours with the run's generator: the same count from the same eligible
    set, different tokens, so values agree only when every eligible token is drawn (above)."""
    import torch
    from verl.trainer.ppo import core_algos

    from sandbox.core.terms import PGTerms
    from sandbox.estimators import make_estimator

    from .verl_side import actor_config

    config = {**BASE, A + "policy_loss.loss_mode": "clip_cov", A + "policy_loss.clip_cov_ratio": 0.2,
              A + "policy_loss.clip_cov_lb": -1.0, A + "policy_loss.clip_cov_ub": 0.05}
    b = make_batch("random")
    m = mapped(config)
    estimator = make_estimator(m.recipe.estimator, **m.recipe.estimator_kwargs)
    terms = PGTerms(logp=b.logp, advantages=b.advantages, mask=b.mask, behavior_logp=b.rollout, proximal_logp=b.old,
                    generator=torch.Generator().manual_seed(0))
    ours = estimator.zeroed_mask(terms)
    _, metrics = core_algos.get_policy_loss_fn("clip_cov")(
        old_log_prob=b.old, log_prob=b.logp, advantages=b.token_advantages, response_mask=b.mask,
        loss_agg_mode="token-mean", config=actor_config(config))
    assert 1 < int(ours.sum()) < int(b.mask.sum())
    assert metrics["actor/pg_clipfrac"] == pytest.approx(float(ours.sum()) / float(b.mask.sum()))
