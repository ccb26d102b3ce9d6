"""The theory lab on bandits (shared/spec/figures.md, "Theory"): gate, prop1-single-context,
prop2-multi-context, contamination, async-signatures.

Every number goes through the library's estimators (``make_estimator``) — closed forms are
*checked against* them, never substituted for them.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from sandbox.advantages import make_advantage
from sandbox.core.seeding import derived_generator
from sandbox.diagnostics import cosine, perpendicular, perpendicular_second_moment
from sandbox.envs.bandits import exact_pg
from sandbox.estimators import Estimator, PGTerms, make_estimator
from sandbox.estimators.delight import ProbabilityGate  # noqa: F401  (re-exported; registered by the library)
from sandbox.frictions import FrictionStack, make_friction
from sandbox.jobs.seeds import offset_seeds
from sandbox.jobs.sweep import Job
from sandbox.objectives import expected_update
from sandbox.runtime.actor import collect
from sandbox.runtime.config import RunConfig
from sandbox.runtime.learner import learner_terms
from sandbox.tasks.bandits import Bandit
from simulations import Figure, Plan, register_figure

DTYPE = torch.float64


def symmetric_logits(K: int, p: float, correct: int = 0) -> torch.Tensor:
    """Logits [K] with π(correct) = p and (1 − p)/(K − 1) on every other arm."""
    z = torch.full((K,), math.log((1 - p) / (K - 1)), dtype=DTYPE)
    z[correct] = math.log(p)
    return z


def per_action_gradients(estimator: Estimator, logits: torch.Tensor, rewards: torch.Tensor, baseline: float,
                         behavior: torch.Tensor | None = None) -> torch.Tensor:
    """Ascent direction of a single sample of each action a: −∇_z loss(a), shape [K, K].

    Each action is its own population member, so the estimator sees a batch of one sample.
    """
    K = logits.shape[-1]
    z = logits.detach().expand(K, 1, K).clone().requires_grad_(True)
    logp = torch.log_softmax(z, -1).gather(-1, torch.arange(K).view(K, 1, 1))  # [K, 1, 1]
    mu = logp.detach() if behavior is None else torch.log(behavior).view(K, 1, 1).to(DTYPE)
    terms = PGTerms(logp=logp, advantages=(rewards - baseline).view(K, 1).to(DTYPE), behavior_logp=mu,
                    proximal_logp=mu)
    (grad,) = torch.autograd.grad(estimator(terms).loss, z)
    return -grad[:, 0, :]


# ----------------------------------------------------------------------------- fidelity
FIDELITY = {
    "quick": {"seeds": 20, "prop1_steps": 100, "prop2_steps": 500, "async_steps": 300, "async_seeds": 8,
              "delays": (0, 16, 64), "mc_batches": 100, "cos_batches": 200,
              "deltas": (0.3, 0.1, 0.03, 0.01, 1e-3, 1e-4)},
    "full": {"seeds": 100, "prop1_steps": 200, "prop2_steps": 1000, "async_steps": 1000, "async_seeds": 30,
             "delays": (0, 1, 4, 16, 64), "mc_batches": 1000, "cos_batches": 1000,
             "deltas": tuple(np.geomspace(0.3, 1e-5, 12).round(8))},
}
FIDELITY["paper"] = FIDELITY["full"]  # the papers' settings already fit the paper tier (~2 min): the same jobs
#: fidelities whose post-hoc windows (prop2's last 40%, async-signatures' steps 100–300, both fixed
#: after their runs had been seen) are confirmed on the same runs one base seed on (``confirmed``)
CONFIRM = ("paper", "full")
#: the windows chosen after their data, the commits that fixed them and the seeds they were seen on
PROP2_WINDOW = ("the window of the last 40% of the budget", "ec1ec0c", "seeds 0–99")
ASYNC_WINDOW = ("the window of steps 100–300", "808521c", "seeds 0–29")


# ----------------------------------------------------------------------------- gate
GATE_METHODS = (("PG", "reinforce", {}), ("DG η=0.5", "dg", {"eta": 0.5}), ("DG η=1", "dg", {"eta": 1.0}),
                ("DG η=2", "dg", {"eta": 2.0}), ("PPO (r=1)", "ppo", {}), ("PMPO", "pmpo", {}))


def gate_table(n_adv: int = 41, n_pi: int = 49) -> pd.DataFrame:
    """Effective weight on ∇log π(a), c = −∂loss/∂log π(a), for one sample at each (A, π(a))."""
    A = np.linspace(-1, 1, n_adv)
    pi = np.geomspace(1e-4, 0.99, n_pi)
    AA, PP = np.meshgrid(A, pi, indexing="ij")
    P = AA.size
    rows = []
    for label, name, kwargs in GATE_METHODS:
        logp = torch.log(torch.tensor(PP.ravel(), dtype=DTYPE)).view(P, 1, 1).requires_grad_(True)
        terms = PGTerms(logp=logp, advantages=torch.tensor(AA.ravel(), dtype=DTYPE).view(P, 1),
                        behavior_logp=logp.detach(), proximal_logp=logp.detach())
        (grad,) = torch.autograd.grad(make_estimator(name, **kwargs)(terms).loss, logp)
        rows.append(pd.DataFrame({"method": label, "A": AA.ravel(), "pi": PP.ravel(),
                                  "weight": (-grad).ravel().numpy()}))
    return pd.concat(rows, ignore_index=True)


# ----------------------------------------------------------------------------- prop 1
def prop1_closed_form(K: int = 100, eta: float = 1.0, b: float = 0.5, B: int = 100, n_batches: int = 100,
                      ps: tuple = (0.01, 0.05, 0.2, 0.5, 0.8, 0.95), seed: int = 0) -> pd.DataFrame:
    """Symmetric bandit: (1) cos(E g_DG, E g_PG); (2) the perpendicular second moments E‖g_⊥‖² of
    single samples, DG over PG, by enumeration, and of batch gradients by Monte Carlo through the
    simulator, against the closed form w₋² = σ(χ₋/η)², χ₋ = −b·log((K − 1)/(1 − p))."""
    pg, dg = make_estimator("reinforce"), make_estimator("dg", eta=eta)
    rows = []
    for p in ps:
        z = symmetric_logits(K, p)
        labels = torch.zeros(1, 1, dtype=torch.long)
        e_pg = expected_update(pg, z.view(1, 1, K), labels, baseline=b).view(K)
        e_dg = expected_update(dg, z.view(1, 1, K), labels, baseline=b).view(K)
        rewards = torch.nn.functional.one_hot(torch.tensor(0), K).to(DTYPE)
        probs = torch.softmax(z, -1)
        per_pg, per_dg = per_action_gradients(pg, z, rewards, b), per_action_gradients(dg, z, rewards, b)
        chi_minus = -b * -math.log((1 - p) / (K - 1))
        w_minus = 1 / (1 + math.exp(-chi_minus / eta))
        # Monte Carlo through the simulator's whole pipeline: independent batches for PG and DG
        # (on shared batches the ratio would be w₋² identically), batch gradient by autograd,
        # E‖ĝ_⊥‖² estimated over batches; its ratio must match w₋² within its bootstrap interval.
        mc = {}
        for label, est in (("pg", pg), ("dg", dg)):
            task = Bandit(N=1, K=K, batch_size=B, population=n_batches, dtype="float64")
            task.init_params(derived_generator(seed, "prop1-mc", p))
            task.env.label_table = torch.zeros(n_batches, 1, dtype=torch.long)
            params = [z.expand(n_batches, 1, K).clone().requires_grad_(True)]
            rollout = collect(task, params, 0, derived_generator(seed, "prop1-mc", p, label), seed)
            terms = learner_terms(task, params, rollout, make_advantage("constant", b=b), None, False)
            (grad,) = torch.autograd.grad(est(terms).loss, params)
            mc[label] = perpendicular(-grad.reshape(n_batches, K), e_pg).pow(2).sum(-1).numpy()
        rows.append({"p": p, "cos_parallel": float(cosine(e_pg, e_dg)),
                     "perp_pg": float(perpendicular_second_moment(per_pg, e_pg, probs)),
                     "perp_dg": float(perpendicular_second_moment(per_dg, e_pg, probs)), "w_minus_sq": w_minus**2,
                     "mc_perp_pg": mc["pg"].tolist(), "mc_perp_dg": mc["dg"].tolist()})
    frame = pd.DataFrame(rows)
    frame["ratio_exact"] = frame["perp_dg"] / frame["perp_pg"]
    return frame


def prop1_runs(fidelity: str, seed: int = 0) -> list[RunConfig]:
    """PG and DG on the symmetric bandit (P1's setting: K = 100, B = 100, b = ½, normalised α = 0.1)."""
    f = FIDELITY[fidelity]
    task = {"N": 1, "K": 100, "batch_size": 100, "population": f["seeds"], "dtype": "float64"}
    return [RunConfig(task="bandit", task_kwargs=task, estimator=name, estimator_kwargs=kw, advantage="constant",
                      advantage_kwargs={"b": 0.5}, optimizer="normalized", lr=0.1, steps=f["prop1_steps"],
                      log_points=40, seed=seed, label=label)
            for label, name, kw in (("PG", "reinforce", {}), ("DG", "dg", {"eta": 1.0}))]


# ----------------------------------------------------------------------------- prop 2
def prop2_weights(N: int = 100, K: int = 10, etas: tuple = (0.5, 1.0, 2.0), population: int = 8,
                  seed: int = 0) -> pd.DataFrame:
    """DG's exact expected update per context against the closed form (1/N)·p/(1 + p^{1/η})·(e_y − π)."""
    g = derived_generator(seed, "prop2-weights")
    z = torch.randn(population, N, K, generator=g, dtype=DTYPE)
    labels = torch.randint(0, K, (population, N), generator=g)
    p = torch.softmax(z, -1).gather(-1, labels.unsqueeze(-1))
    direction = exact_pg(z, labels) / p  # e_y − π
    rows = []
    for eta in etas:
        got = expected_update(make_estimator("dg", eta=eta), z, labels, baseline=0.0)
        want = p / (1 + p.pow(1 / eta)) * direction / N
        rows.append({"eta": eta, "max_abs_error": float((got - want).abs().max()),
                     "max_rel_error": float(((got - want).abs() / want.abs().clamp(min=1e-300)).max()),
                     "weight_min": float((p / (1 + p.pow(1 / eta))).min()), "weight_max": float((p / (1 + p.pow(1 / eta))).max())})
    return pd.DataFrame(rows)


def prop2_runs(fidelity: str, seed: int = 0) -> list[RunConfig]:
    """PG, DG and CE with exact updates, normalised α = 0.1 (the papers' step size, as in Prop. 1):
    the error ordering CE < DG < PG sets in after a crossing, so it is asserted over a late window."""
    f = FIDELITY[fidelity]
    task = {"N": 100, "K": 10, "population": f["seeds"], "mode": "exact", "init_std": 1.0, "dtype": "float64",
            "reference_estimators": ["reinforce", "dg"]}
    return [RunConfig(task="bandit", task_kwargs=task, estimator=name, estimator_kwargs=kw, advantage="constant",
                      advantage_kwargs={"b": 0.0}, optimizer="normalized", lr=0.1, steps=f["prop2_steps"],
                      log_points=60, seed=seed, label=label)
            for label, name, kw in (("PG", "reinforce", {}), ("DG", "dg", {"eta": 1.0}), ("CE", "xent", {}))]


# ----------------------------------------------------------------------------- contamination
CONTAMINATION_METHODS = (("PG", "reinforce", {}), ("IS-PG (exact μ)", "is_pg", {}),
                         ("prob gate", "prob_gate", {}), ("DG", "dg", {"eta": 1.0}))


def contamination_moments(K: int = 10, rho: float = 0.1, deltas: tuple = (0.3, 0.1, 0.01, 1e-3)) -> pd.DataFrame:
    """Per sample type, the estimator's weight c (g = c·g_PG) and the second moment of g = c·A·(e_a − π)
    split into its part along the true gradient π(y)(e_y − π) of the sample's context (signal) and
    perpendicular to it (noise). In this bandit a success is exactly parallel to ∇J: rare successes
    carry signal, rare failures carry the perpendicular noise.

    A solved context has π(y) = 1 − δ; its rare failure is a wrong arm with π = δ/(K − 1), injected by a
    point-mass bug at rate ρ (μ = ρ + (1 − ρ)·π). An unsolved context puts 1 − δ on a wrong arm and
    δ/(K − 1) on the correct one; its rare success is injected by a discovery at rate ρ. Baseline: V(x).
    """
    rows = []
    for delta in deltas:
        q = delta / (K - 1)
        solved = symmetric_logits(K, 1 - delta, correct=0)  # y = 0, rare arm 1
        unsolved = solved.clone()  # arm 0 common (wrong), arm 1 rare (correct)
        cases = {
            "common": (solved, 0, 0, (1 - rho) * (1 - delta)),
            "rare failure": (solved, 0, 1, rho + (1 - rho) * q),
            "rare success": (unsolved, 1, 1, rho + (1 - rho) * q),
        }
        for kind, (z, y, a, mu_a) in cases.items():
            probs = torch.softmax(z, -1)
            rewards = torch.nn.functional.one_hot(torch.tensor(y), K).to(DTYPE)
            value = float(probs[y])
            true_grad = probs[y] * (rewards - probs)
            behavior = probs.clone()
            behavior[a] = mu_a
            for label, name, kw in CONTAMINATION_METHODS:
                g = per_action_gradients(make_estimator(name, **kw), z, rewards, value, behavior)[a]
                pg = per_action_gradients(make_estimator("reinforce"), z, rewards, value)[a]
                weight = float((g * pg).sum() / (pg * pg).sum())  # g = weight · g_PG
                perp = perpendicular(g, true_grad)
                rows.append({"delta": delta, "type": kind, "method": label, "pi": float(probs[a]),
                             "advantage": float(rewards[a] - value), "weight": weight,
                             "perp_moment": float(perp.pow(2).sum()),
                             "parallel_moment": float((g - perp).pow(2).sum())})
    return pd.DataFrame(rows)


def contamination_cosine(K: int = 10, B: int = 100, rho: float = 0.1, deltas: tuple = (0.3, 0.1, 0.01),
                         n_batches: int = 200, seed: int = 0) -> pd.DataFrame:
    """Mean finite-batch cosine between each estimator's batch gradient and ∇J, for batches from a
    buggy actor on a solved context (π(y) = 1 − δ): a point mass on a wrong arm (rate ρ), a uniform
    ε-random actor (rate ρ), a stale actor (an older policy of quality min(0.5, 10δ)); and from a
    discovering actor on an unsolved context (the correct arm has π = δ/(K − 1) and is injected at
    rate ρ). Batches are a population sampled by the bandit task with the friction wrappers;
    IS-PG uses the probabilities the actor really sampled from."""
    rows = []
    for delta in deltas:
        z = symmetric_logits(K, 1 - delta).expand(n_batches, 1, K).clone()
        for actor in ("point mass", "uniform", "stale", "discovery"):
            frictions = {"point mass": [make_friction("landmine", p_bug=rho)],
                         "uniform": [make_friction("eps_random", eps=rho)], "stale": [],
                         "discovery": [make_friction("rare_discovery", p_disc=rho)]}[actor]
            task = Bandit(N=1, K=K, batch_size=B, population=n_batches, dtype="float64",
                          frictions=FrictionStack(frictions))
            task.init_params(derived_generator(seed, "cos-init"))
            # solved: the likely arm 0 is correct; unsolved (discovery): the rare arm 1 is correct
            task.env.label_table = torch.full((n_batches, 1), 1 if actor == "discovery" else 0, dtype=torch.long)
            actor_z = symmetric_logits(K, 1 - min(0.5, 10 * delta)).expand(n_batches, 1, K).clone() if actor == "stale" else z
            rollout = collect(task, [actor_z], 0, derived_generator(seed, "cos", delta, actor), seed)
            true = exact_pg(z, task.label_table).reshape(n_batches, -1)
            for label, name, kw in CONTAMINATION_METHODS:
                params = [z.clone().requires_grad_(True)]
                terms = learner_terms(task, params, rollout, _group_mean(), None, False)
                if name == "is_pg":  # exact IS: the probabilities the actor really sampled from
                    terms = PGTerms(logp=terms.logp, advantages=terms.advantages,
                                    behavior_logp=rollout.true_behavior_logp, group=terms.group)
                (grad,) = torch.autograd.grad(make_estimator(name, **kw)(terms).loss, params)
                cos = cosine(-grad.reshape(n_batches, -1), true).numpy()
                rows.append(pd.DataFrame({"delta": delta, "actor": actor, "method": label,
                                          "batch": np.arange(n_batches), "cos": cos}))
    return pd.concat(rows, ignore_index=True)


def _group_mean():
    return make_advantage("group_mean")


# ----------------------------------------------------------------------------- async signatures
ASYNC_CONTROLLERS = (("none", ()), ("GAC", (("gac", {"c_proj": 0.1, "c_skip": 1.0}),)), ("ESS step", (("ess_lr", {}),)))


def async_runs(fidelity: str, seed: int = 0) -> list[RunConfig]:
    """REINFORCE, synchronous and D steps stale, without and with GAC or the ESS-scaled step."""
    f = FIDELITY[fidelity]
    task = {"N": 20, "K": 10, "batch_size": 20, "samples_per_context": 8, "population": f["async_seeds"],
            "init_std": 1.0, "dtype": "float64"}
    runs = []
    for D in f["delays"]:
        for ctrl_label, controllers in ASYNC_CONTROLLERS:
            if D == 0 and controllers:
                continue
            runs.append(RunConfig(task="bandit", task_kwargs=task, estimator="reinforce", advantage="group_mean",
                                  optimizer="adam", lr=0.1, steps=f["async_steps"], log_points=60,
                                  staleness={"kind": "fixed", "D": D} if D else {}, controllers=controllers,
                                  seed=seed, label=f"D={D} {ctrl_label}"))
    return runs


#: what async-signatures' committed data keep of each run (26 runs × 30 seeds × 50 logged steps): the
#: columns its notebook and the loading read, of 48 — the other 18 metrics made the file 3.39 MB —, the
#: cosines, error and step scale in single precision; ESS/B stays float64: its synchronous CHECK prints
#: the float64 rounding (|ESS/B − 1| = 4.4e-16), which float32 would round away
ASYNC_DATA = {"columns": ("run_id", "job_id", "label", "seed", "member", "step", "diverged", "steps", "log_points",
                          "error", "cos_consecutive", "cos_consecutive_update", "ess_frac", "lr_scale"),
              "float32": ("error", "cos_consecutive", "cos_consecutive_update", "lr_scale")}


#: what prop2-multi-context's committed data keep (7 jobs: 3 estimators × 2 seed sets × 100 seeds × the logged
#: steps, and the weights table): the columns its notebook and the loading read, of 48 — the unread gradient
#: norms, entropies and cosines made the file 1.83 MB —, the error and the CE-oracle cosine (plotted) in single
#: precision; the reference cosines stay float64: dg-closer-to-ce-every-step prints their smallest gap
#: (9.8e-13), which float32 would round away, and max_rel_error too (the 1e-12 weight-formula CHECK)
PROP2_DATA = {"columns": ("run_id", "job_id", "label", "seed", "member", "step", "diverged", "steps", "log_points",
                          "error", "cos_ce", "ref_dg_cos_ce", "ref_reinforce_cos_ce", "max_rel_error"),
              "float32": ("error", "cos_ce")}


# ----------------------------------------------------------------------------- figures
def _jobs(fn: str, label: str, **params) -> Job:
    return Job(f"simulations.bandit_theory:{fn}", params, label)


def confirmed(jobs: list[Job], fidelity: str) -> Plan:
    """The figure's jobs tagged ``seed_set`` 'original' and, where the fidelity confirms its
    post-hoc window (``CONFIRM``), the same jobs one base seed on, tagged 'confirmation'."""
    plan: Plan = [({"seed_set": "original"}, jobs)]
    return plan + ([({"seed_set": "confirmation"}, offset_seeds(jobs, 1))] if fidelity in CONFIRM else [])


register_figure(Figure("gate", "theory", "Effective weight w·A of PG, DG, PPO and PMPO",
                       lambda fid: [_jobs("gate_table", "gate")], "notebooks/gate.py"))
register_figure(Figure(
    "prop1-single-context", "theory", "Prop. 1: the symmetric single-context bandit",
    lambda fid: [Job.training(c) for c in prop1_runs(fid)]
    + [_jobs("prop1_closed_form", "closed form", n_batches=FIDELITY[fid]["mc_batches"])],
    "notebooks/prop1_single_context.py"))
register_figure(Figure(
    "prop2-multi-context", "theory", "Prop. 2: exact gradients on the multi-context bandit",
    None, "notebooks/prop2_multi_context.py",
    plan=lambda fid: confirmed([Job.training(c) for c in prop2_runs(fid)], fid)
    + [({"seed_set": "original"}, [_jobs("prop2_weights", "weights")])], data_spec=PROP2_DATA))
register_figure(Figure(
    "contamination", "theory", "Contaminated batches: perpendicular moments and finite-batch cosines",
    lambda fid: [_jobs("contamination_moments", "moments", deltas=list(FIDELITY[fid]["deltas"])),
                 _jobs("contamination_cosine", "cosine", deltas=list(FIDELITY[fid]["deltas"]),
                       n_batches=FIDELITY[fid]["cos_batches"])],
    "notebooks/contamination.py"))
register_figure(Figure(
    "async-signatures", "theory", "Staleness signatures: consecutive-gradient cosine and ESS/B",
    None, "notebooks/async_signatures.py", plan=lambda fid: confirmed([Job.training(c) for c in async_runs(fid)], fid),
    data_spec=ASYNC_DATA))


__all__ = ["ProbabilityGate", "contamination_cosine", "contamination_moments", "gate_table",
           "prop1_closed_form", "prop2_weights", "symmetric_logits"]
