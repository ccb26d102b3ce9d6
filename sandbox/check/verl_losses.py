"""verl's policy losses and rollout correction mapped onto our estimators (the loss half of
``sandbox.check.verl``; docs/check.md, tests/conformance/test_verl_*.py run verl's own code beside).

Read at verl 0.9.1: ``verl/trainer/ppo/core_algos.py`` (the registered policy losses,
``compute_policy_loss_bypass_mode``), ``verl/trainer/ppo/rollout_corr_helper.py``
(``compute_rollout_correction_and_add_to_batch``, ``apply_bypass_mode``, the threshold parsers) and
``verl/trainer/ppo/ray_trainer.py`` (decoupled correction only when the batch carries the engine's
``rollout_log_probs``, i.e. with ``rollout.calculate_log_probs``).
"""

from __future__ import annotations

from sandbox.check.mapping import Settings

A, R, G, C, AS = ("actor_rollout_ref.actor.", "actor_rollout_ref.rollout.", "algorithm.",
                  "algorithm.rollout_correction.", "async_training.")
EPS = {"eps_low": A + "clip_ratio_low", "eps_high": A + "clip_ratio_high"}
#: loss_mode → our estimator, its fields from their keys, and fields verl fixes for that loss
LOSSES = {
    "vanilla": ("ppo", {**EPS, "dual_clip": A + "clip_ratio_c"}, {}),
    "gspo": ("gspo", EPS, {}),  # verl 0.9.1's gspo reads loss_agg_mode (its default, token-mean)
    # geo_mean averages the sequences' losses (torch.mean; "loss_agg_mode: not used"), sapo hard-codes
    # seq-mean-token-mean: both ignore loss_agg_mode (core_algos.py, compute_policy_loss_geo_mean/_sapo)
    "geo_mean": ("gmpo", EPS, {"aggregation": "seq-mean-token-mean"}),
    "cispo": ("cispo", EPS, {}),
    "sapo": ("sapo", {"tau_pos": A + "tau_pos", "tau_neg": A + "tau_neg"}, {"aggregation": "seq-mean-token-mean"}),
    "clip_cov": ("clip_cov", {**EPS, "ratio": A + "policy_loss.clip_cov_ratio", "cov_lb": A + "policy_loss.clip_cov_lb",
                              "cov_ub": A + "policy_loss.clip_cov_ub"}, {}),
    "kl_cov": ("kl_cov", {"ratio": A + "policy_loss.kl_cov_ratio", "coef": A + "policy_loss.ppo_kl_coef"}, {}),
    "gpg": ("reinforce", {}, {}),
}
RS_LEVELS = ("token", "seq_sum", "seq_mean", "seq_max")


def loss(s: Settings, mode: str, bypass: bool = False) -> tuple[str, dict]:
    """The estimator of ``loss_mode`` with its fields; clip_ratio applies where low/high are null
    (in bypass mode verl's loss is vanilla PPO whatever loss_mode says)."""
    if mode not in LOSSES:
        s.refuse(A + "policy_loss.loss_mode", f"not a loss the check models (known: {', '.join(LOSSES)})")
    name, fields, fixed = LOSSES[mode]
    if not bypass:
        s.map(A + "policy_loss.loss_mode", "estimator", name)
    kwargs = {}
    for ours, theirs in fields.items():
        if s[theirs] is None and theirs in EPS.values():  # verl: a null clip_ratio_low/high is clip_ratio
            kwargs[ours] = s.map(A + "clip_ratio", f"{name}.{ours}", note=f"{theirs.split('.')[-1]} is null")
        else:
            kwargs[ours] = s.map(theirs, f"{name}.{ours}")
    if s.given(A + "clip_ratio") and not s.covered(A + "clip_ratio"):
        s.inert(A + "clip_ratio", "clip_ratio_low/high (default 0.2) take precedence")
    for ours, value in fixed.items():
        kwargs[ours] = s.map(A + "loss_agg_mode", f"{name}.{ours}", value,
                             note=f"verl's {mode} loss ignores loss_agg_mode")
    return name, kwargs


def is_threshold(s: Settings) -> tuple[float | None, float]:
    """``rollout_is_threshold`` as (lower, upper): a number or 'x' truncates at x (TIS); 'lo_hi'
    zeroes weights outside [lo, hi] (IcePop) — verl's ``_parse_rollout_is_threshold``."""
    key = C + "rollout_is_threshold"
    spec = s[key]
    try:
        if isinstance(spec, bool):
            raise ValueError
        parts = [float(x) for x in spec.split("_", 1)] if isinstance(spec, str) else [float(spec)]
    except (TypeError, ValueError):
        s.refuse(key, "must be a positive number, or 'lower_upper' (IcePop)")
    lower, upper = parts if len(parts) == 2 else (None, parts[0])
    if not upper > 0 or (lower is not None and not 0 < lower <= upper):
        s.refuse(key, "needs 0 < lower ≤ upper (verl's own check)")
    return lower, upper


def rs_threshold(s: Settings, statistic: str) -> tuple[float | None, float]:
    """``rollout_rs_threshold`` as (lower, upper) — verl's ``_parse_rollout_rs_thresholds`` for one
    option: k1 takes 'lo_hi' or an upper ratio bound u (lower 1/u); k2/k3 one upper bound."""
    key = C + "rollout_rs_threshold"
    spec = s[key]
    try:
        if spec is None or isinstance(spec, bool):
            raise ValueError
        parts = [float(x) for x in str(spec).split("_", 1)]
    except (TypeError, ValueError):
        s.refuse(key, "rejection sampling needs a positive threshold ('lower_upper' for k1)")
    if len(parts) == 2 and statistic != "k1":
        s.refuse(key, f"a {statistic} option takes one upper bound, without '_'")
    lower, upper = parts if len(parts) == 2 else (None if statistic != "k1" else 1.0 / parts[0], parts[0])
    if not upper > 0 or (lower is not None and not 0 < lower <= upper):
        s.refuse(key, "needs 0 < lower ≤ upper (verl's own check)")
    return lower, upper


def _rejection(s: Settings, loss_type: str) -> tuple[str, dict]:
    """verl's rollout_rs (one option) and its threshold as the ``rollout_rs`` estimator's fields."""
    option = str(s[C + "rollout_rs"])
    level, _, statistic = option.rpartition("_")
    if "," in option or statistic not in ("k1", "k2", "k3") or level not in RS_LEVELS or option == "seq_max_k1":
        s.refuse(C + "rollout_rs", "one option of token_k*, seq_sum_k*, seq_mean_k*, seq_max_k2/k3 is modelled")
    lower, upper = rs_threshold(s, statistic)
    s.map(C + "rollout_rs", "estimator", "rollout_rs", note="bypass: rejection sampling, then the loss_type's loss")
    kwargs = {"loss": s.map(C + "loss_type", "rollout_rs.loss", loss_type),
              "statistic": s.map(C + "rollout_rs", "rollout_rs.statistic", statistic),
              "level": s.map(C + "rollout_rs", "rollout_rs.level", level),
              "upper": s.map(C + "rollout_rs_threshold", "rollout_rs.upper", upper)}
    if statistic == "k1":
        kwargs["lower"] = s.map(C + "rollout_rs_threshold", "rollout_rs.lower", lower)
    if loss_type == "ppo_clip":
        low, high = (s[k] if s[k] is not None else s[A + "clip_ratio"] for k in EPS.values())
        if low != high:
            s.refuse(A + "clip_ratio_high", "an asymmetric clip with rollout_rs is not modelled (one ε)")
        kwargs["eps"] = s.map(A + "clip_ratio_low", "rollout_rs.eps", low)
        kwargs["dual_clip"] = s.map(A + "clip_ratio_c", "rollout_rs.dual_clip",
                                    note="verl's bypass PPO-clip is compute_policy_loss_vanilla, dual clip included")
    return "rollout_rs", kwargs


def _decoupled(s: Settings, level: str | None) -> tuple[str, dict]:
    """Three policies: the loss against the recomputed π_old, times verl's rollout_is weights
    sg(π_old/μ) — applied only when the batch carries the engine's log-probs (calculate_log_probs)."""
    if s[C + "rollout_rs"] is not None:
        s.refuse(C + "rollout_rs", "rejection sampling is modelled in bypass mode only (the rollout_rs estimator)")
    name, kwargs = loss(s, s[A + "policy_loss.loss_mode"])
    if level is None:
        return name, kwargs
    if not s[R + "calculate_log_probs"]:
        s.inert(C + "rollout_is", "not applied: verl's trainer corrects only when the batch carries the engine's "
                                  "rollout_log_probs, and rollout.calculate_log_probs is off")
        return name, kwargs
    if name == "gmpo" and level == "token":
        s.refuse(C + "rollout_is", "geo_mean folds token IS weights into a geometric mean per sequence, which "
                                   "is not modelled (sequence-level IS is)")
    lower, upper = is_threshold(s)
    mode = f"{level}_{'truncate' if lower is None else 'mask'}"
    kwargs["rollout_is"] = s.map(C + "rollout_is × " + C + "rollout_is_threshold", f"{name}.rollout_is", mode,
                                 note="IcePop: zero outside [lower, upper]" if lower is not None else "")
    kwargs["rollout_is_max"] = s.map(C + "rollout_is_threshold", f"{name}.rollout_is_max", upper)
    if lower is not None:
        kwargs["rollout_is_min"] = s.map(C + "rollout_is_threshold", f"{name}.rollout_is_min", lower)
    return name, kwargs


def estimator(s: Settings) -> tuple[str, dict]:
    """The loss with the rollout correction: bypass mode (π_old = μ) or decoupled (three policies)."""
    level = s[C + "rollout_is"]
    if level not in (None, "token", "sequence"):
        s.refuse(C + "rollout_is", "IS at 'token' or 'sequence' level is modelled")
    if not s[C + "bypass_mode"]:
        return _decoupled(s, level)
    if not s[R + "calculate_log_probs"]:
        s.refuse(R + "calculate_log_probs", "bypass_mode uses the engine's log-probs as π_old, and verl stops "
                                            "without them (apply_bypass_mode)")
    loss_type = s[C + "loss_type"]
    if loss_type not in ("ppo_clip", "reinforce"):
        s.refuse(C + "loss_type", "bypass mode's loss_type is 'ppo_clip' or 'reinforce'")
    if s[A + "policy_loss.loss_mode"] != "vanilla":
        s.inert(A + "policy_loss.loss_mode", "bypass mode replaces the loss (verl sets loss_mode='bypass_mode')")
    if s[C + "rollout_rs"] is not None:
        if loss_type == "reinforce" and level is not None:
            s.refuse(C + "rollout_is", "IS weights with rejection sampling in REINFORCE bypass are not modelled")
        return _rejection(s, loss_type)
    if loss_type == "ppo_clip":
        if level is not None:
            s.inert(C + "rollout_is", "not applied with loss_type ppo_clip: the clipped ratio π_θ/μ is the correction")
        s.map(C + "loss_type", "estimator", "ppo", note="bypass: PPO-clip with π_old = μ")
        return loss(s, "vanilla", bypass=True)
    if level is None:
        return s.map(C + "loss_type", "estimator", "reinforce", note="bypass"), {}
    lower, upper = is_threshold(s)
    if lower is not None:  # IcePop: weights outside [lower, upper] are zeroed
        s.map(C + "loss_type", "estimator", "mis", note="bypass: REINFORCE with masked IS weights (IcePop)")
        return "mis", {"level": s.map(C + "rollout_is", "mis.level", level),
                       "alpha": s.map(C + "rollout_is_threshold", "mis.alpha", lower),
                       "beta": s.map(C + "rollout_is_threshold", "mis.beta", upper)}
    s.map(C + "loss_type", "estimator", "tis", note="bypass: REINFORCE with IS weights")
    return "tis", {"level": s.map(C + "rollout_is", "tis.level", level),
                   "C": s.map(C + "rollout_is_threshold", "tis.C", upper)}
