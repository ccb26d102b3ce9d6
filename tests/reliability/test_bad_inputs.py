"""The bad-input battery (issue 13): every bad value below is refused when the config is built —
never steps into a run, never as a "diverged" result — with ONE ``ValueError`` line that names
the argument at fault.

Each value goes in through ``RunConfig`` (the message then starts with the RunConfig field:
``task_kwargs: K must …``), most also straight into their registry (``make_task``,
``make_estimator`` …), and a set of ``--set`` overrides through the CLI's ``config_from_args``.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from sandbox.advantages import make_advantage
from sandbox.cli import build_parser, config_from_args
from sandbox.controllers import make_controller
from sandbox.estimators import make_estimator
from sandbox.frictions import DelaySchedule, make_friction
from sandbox.runtime.config import RunConfig
from sandbox.tasks import make_task

NAN, INF = math.nan, math.inf


def refused(call, *names: str) -> str:
    """Run ``call``; require one ValueError line naming each of ``names`` (as a whole word)."""
    with pytest.raises(ValueError) as err:
        call()
    message = str(err.value)
    assert message and "\n" not in message and "\r" not in message, f"not one line: {message!r}"
    for name in names:
        assert re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", message), f"{name!r} not named in {message!r}"
    return message


def case(target: str, kwargs: dict, field: str, direct: bool = True):
    """A bad keyword set for ``target``; ``direct=False`` when only RunConfig checks it (the type
    of a flag, path or list field, checked against the dataclass annotation)."""
    label = ",".join(f"{k}={v!r}" for k, v in kwargs.items())
    return pytest.param(target, kwargs, field, direct, id=f"{target}-{label}")


# ----------------------------------------------------------------------------- RunConfig's own fields
RUN_CONFIG = [
    ({"steps": 1.5}, "steps"), ({"steps": 2.0}, "steps"), ({"steps": True}, "steps"), ({"steps": "100"}, "steps"),
    ({"steps": -1}, "steps"), ({"steps": None}, "steps"), ({"steps": NAN}, "steps"), ({"steps": np.float32(3)}, "steps"),
    ({"seed": 1.5}, "seed"), ({"seed": -1}, "seed"), ({"seed": False}, "seed"), ({"seed": "0"}, "seed"),
    ({"seed": None}, "seed"),
    ({"log_points": 0}, "log_points"), ({"log_points": 2.5}, "log_points"), ({"log_points": True}, "log_points"),
    ({"lr": 0}, "lr"), ({"lr": -1e-3}, "lr"), ({"lr": INF}, "lr"), ({"lr": -INF}, "lr"), ({"lr": NAN}, "lr"),
    ({"lr": "fast"}, "lr"), ({"lr": True}, "lr"), ({"lr": np.float64(NAN)}, "lr"),
    ({"optimizer": "adamax"}, "optimizer"), ({"optimizer": 3}, "optimizer"),
    ({"proximal": "both"}, "proximal"), ({"history": "ring"}, "history"),
    ({"label": 3}, "label"), ({"label": None}, "label"),
    ({"task": "nope"}, "task"), ({"task": 3}, "task"), ({"task": ["bandit"]}, "task"),
    ({"estimator": "nope"}, "estimator"), ({"estimator": None}, "estimator"),
    ({"advantage": "mean"}, "advantage"),
    ({"task_kwargs": 5}, "task_kwargs"), ({"task_kwargs": [("K", 3)]}, "task_kwargs"), ({"task_kwargs": {1: 2}}, "task_kwargs"),
    ({"estimator_kwargs": "eta=1"}, "estimator_kwargs"), ({"advantage_kwargs": None}, "advantage_kwargs"),
    ({"controllers": "gac"}, "controllers"), ({"controllers": (("gac",),)}, "controllers"),
    ({"controllers": (("gac", 1),)}, "controllers"), ({"controllers": ((3, {}),)}, "controllers"),
    ({"controllers": (("nope", {}),)}, "controllers[0]"),
    ({"frictions": "landmine"}, "frictions"), ({"frictions": (("landmine", {}, {}),)}, "frictions"),
    ({"frictions": (("typo_noise", {}),)}, "frictions[0]"),
    ({"staleness": "fixed"}, "staleness"), ({"staleness": {"kind": "sometimes"}}, "staleness"),
    ({"staleness": {"D": 1.5}}, "D"), ({"staleness": {"D": -1}}, "D"), ({"staleness": {"p": 0}}, "p"),
    ({"staleness": {"p": NAN}}, "p"), ({"staleness": {"n_actors": 0}}, "n_actors"),
    ({"staleness": {"n_actors": 2.5}}, "n_actors"), ({"staleness": {"delay": 3}}, "staleness"),
    ({"staleness": {"kind": "fixed", "D": True}}, "D"),
]


@pytest.mark.parametrize("changes, name", RUN_CONFIG, ids=[f"{k}={v!r}" for c, _ in RUN_CONFIG for k, v in c.items()])
def test_run_config_fields(changes, name):
    refused(lambda: RunConfig(**changes), name)


# ----------------------------------------------------------------------------- task kwargs
TASKS = [
    case("bandit", {"K": 1}, "K"), case("bandit", {"K": 2.5}, "K"), case("bandit", {"N": 0}, "N"),
    case("bandit", {"batch_size": 0}, "batch_size"), case("bandit", {"batch_size": 1.5}, "batch_size"),
    case("bandit", {"samples_per_context": True}, "samples_per_context"), case("bandit", {"population": 0}, "population"),
    case("bandit", {"population": 2.0}, "population"), case("bandit", {"init_std": -1}, "init_std"),
    case("bandit", {"init_std": INF}, "init_std"), case("bandit", {"init_std": NAN}, "init_std"),
    case("bandit", {"mode": "both"}, "mode"), case("bandit", {"dtype": "float16"}, "dtype"),
    case("bandit", {"arms": 3}, "arms"), case("bandit", {"reference_estimators": "dg"}, "reference_estimators", False),
    case("gaussian_bandit", {"mu": NAN}, "mu"), case("gaussian_bandit", {"mu": INF}, "mu"),
    case("gaussian_bandit", {"mu": "high"}, "mu"), case("gaussian_bandit", {"sigma": INF}, "sigma"),
    case("gaussian_bandit", {"sigma": -1}, "sigma"), case("gaussian_bandit", {"K": 3}, "K"),
    case("mnist", {"batch_size": 0}, "batch_size"), case("mnist", {"batch_size": 10.5}, "batch_size"),
    case("mnist", {"hidden": 0}, "hidden"), case("mnist", {"eval_size": -1}, "eval_size"),
    case("mnist", {"train_size": 10000}, "train_size"), case("mnist", {"train_size": 0.5}, "train_size"),
    case("mnist", {"split": "train"}, "split"), case("mnist", {"mode": "x"}, "mode"),
    case("mnist", {"behavior": "x"}, "behavior"), case("mnist", {"population": True}, "population"),
    case("mnist", {"samples_per_context": 0}, "samples_per_context"), case("mnist", {"probes": ("nope",)}, "nope"),
    case("mnist", {"probes": "dg"}, "probes", False), case("mnist", {"probe_advantage": "mean"}, "mean"),
    case("mnist", {"download": "no"}, "download", False), case("mnist", {"data_dir": 5}, "data_dir", False),
    case("sequences", {"H": 0}, "H"), case("sequences", {"H": 2.5}, "H"), case("sequences", {"V": 1}, "V"),
    case("sequences", {"problem": "sort"}, "problem"), case("sequences", {"n_pairs": 0}, "n_pairs"),
    case("sequences", {"sub_answer": 1}, "sub_answer"), case("sequences", {"kappa": 1.5}, "kappa"),
    case("sequences", {"temperature": 0}, "temperature"), case("sequences", {"temperature": INF}, "temperature"),
    case("sequences", {"eps_mix": 2}, "eps_mix"), case("sequences", {"p_easy": NAN}, "p_easy"),
    case("sequences", {"width": 64.0}, "width"), case("sequences", {"heads": 0}, "heads"),
    case("sequences", {"width": 10, "heads": 4}, "width"), case("sequences", {"init_std": INF}, "init_std"),
    case("sequences", {"init_std": 0}, "init_std"), case("sequences", {"dtype": "half"}, "dtype"),
    case("sequences", {"problem": "key_value", "eval_mode": "exact"}, "eval_mode"),
    case("sequences", {"prompts_per_step": 0}, "prompts_per_step"), case("sequences", {"n_prompts": -1}, "n_prompts"),
    case("sequences", {"share_prompts": 1}, "share_prompts", False),
    case("reverse_copy", {"problem": "bit_parity"}, "problem"), case("bit_parity", {"V": 3}, "V"),
    case("key_value", {"n_pairs": 1.5}, "n_pairs"), case("subsequence_match", {"sub_prompt": 0}, "sub_prompt"),
    case("hf_text", {"hidden": 1.5}, "hidden"), case("hf_text", {"layers": 0}, "layers"),
    case("hf_text", {"population": 2}, "population"), case("hf_text", {"population": 1.0}, "population"),
    case("hf_text", {"temperature": 0}, "temperature"), case("hf_text", {"max_new_tokens": -1}, "max_new_tokens"),
    case("hf_text", {"chunk_size": 0}, "chunk_size"), case("hf_text", {"tokenizer": "bpe"}, "tokenizer"),
    case("hf_text", {"arch": "gpt2"}, "arch"), case("hf_text", {"dtype": "int8"}, "dtype"),
    case("hf_text", {"env": "chess"}, "chess"), case("hf_text", {"env_kwargs": {"digits": 7}}, "digits"),
    case("hf_text", {"env_kwargs": {"digits": 1.5}}, "digits"), case("hf_text", {"path": "/nonexistent/model"}, "path"),
    case("hf_text", {"tie_embeddings": "yes"}, "tie_embeddings", False),
    case("text_arithmetic", {"env_kwargs": {"modulo": 1}}, "modulo"),
    case("text_arithmetic", {"env_kwargs": {"modulo": 0.0}}, "modulo"),
    case("text_arithmetic", {"env_kwargs": {"op": "/"}}, "op"), case("text_arithmetic", {"env": "reverse"}, "env"),
    case("text_reverse", {"env_kwargs": {"length": 0}}, "length"), case("text_reverse", {"env_kwargs": {"alphabet": "a"}}, "alphabet"),
    case("text_reverse", {"env_kwargs": {"kappa": 2}}, "kappa"), case("text_parity", {"env_kwargs": {"length": 2.0}}, "length"),
]


@pytest.mark.parametrize("task, kwargs, field, direct", TASKS)
def test_task_kwargs(task, kwargs, field, direct):
    message = refused(lambda: RunConfig(task=task, task_kwargs=kwargs), field)
    assert message.startswith("task_kwargs: ")
    if direct:
        refused(lambda: make_task(task, **kwargs), field)


# ----------------------------------------------------------------------------- estimator / advantage kwargs
ESTIMATORS = [
    case("reinforce", {"aggregation": "sum"}, "aggregation"), case("reinforce", {"eta": 1.0}, "eta"),
    case("dg", {"eta": -1}, "eta"), case("dg", {"eta": NAN}, "eta"), case("dg", {"eta": "1"}, "eta"),
    case("dg", {"eta": INF}, "eta"), case("dg", {"lam": INF}, "lam"), case("dg", {"lam": None}, "lam"),
    case("dg", {"alpha": 2}, "alpha"), case("dg", {"gate_input": "x"}, "gate_input"),
    case("dg", {"surprisal_clip": 0}, "surprisal_clip"), case("dg", {"stochastic": "no"}, "stochastic", False),
    case("dg", {"whiten": 1}, "whiten", False),
    case("kondo", {"pct": 0}, "pct"), case("kondo", {"pct": 1.5}, "pct"), case("kondo", {"priority": "x"}, "priority"),
    case("awr", {"beta": 0}, "beta"), case("awr", {"w_max": 0}, "w_max"), case("awr", {"w_max": NAN}, "w_max"),
    case("tis", {"C": 0}, "C"), case("tis", {"C": NAN}, "C"), case("tis", {"level": "batch"}, "level"),
    case("mis", {"alpha": -1}, "alpha"), case("mis", {"beta": 0.1}, "beta"), case("mis", {"geometric": True}, "geometric"),
    case("vtrace_pg", {"gamma": 1.5}, "gamma"), case("vtrace_pg", {"rho_bar": 0}, "rho_bar"),
    case("vtrace_pg", {"c_bar": -INF}, "c_bar"),
    case("ppo", {"eps_low": 2}, "eps_low"), case("ppo", {"eps_high": -1}, "eps_high"), case("ppo", {"dual_clip": 1}, "dual_clip"),
    case("ppo", {"eps_low": INF}, "eps_low"),
    case("decoupled_ppo", {"eps": 2}, "eps"), case("decoupled_ppo", {"k_max": 0}, "k_max"),
    case("cispo", {"eps_high": -1}, "eps_high"), case("cispo", {"eps_low": NAN}, "eps_low"),
    case("sapo", {"tau_pos": 0}, "tau_pos"), case("sapo", {"tau_neg": -INF}, "tau_neg"),
    case("opsm", {"delta": -1}, "delta"), case("gspo", {"eps_low": -0.1}, "eps_low"),
    case("m2po", {"tau": 0}, "tau"), case("pmpo", {"alpha": 1.5}, "alpha"), case("pmpo", {"beta": INF}, "beta"),
]
ADVANTAGES = [
    case("grpo", {"eps": 0}, "eps"), case("grpo", {"eps": INF}, "eps"), case("grpo", {"eps": NAN}, "eps"),
    case("constant", {"b": INF}, "b"), case("constant", {"b": NAN}, "b"), case("constant", {"b": "1"}, "b"),
    case("constant", {"b": True}, "b"), case("min_variance", {"weights": "abs"}, "weights"),
    case("group_mean", {"eps": 1e-6}, "eps"),
]


@pytest.mark.parametrize("name, kwargs, field, direct", ESTIMATORS)
def test_estimator_kwargs(name, kwargs, field, direct):
    assert refused(lambda: RunConfig(estimator=name, estimator_kwargs=kwargs), field).startswith("estimator_kwargs: ")
    if direct:
        refused(lambda: make_estimator(name, **kwargs), field)


@pytest.mark.parametrize("name, kwargs, field, direct", ADVANTAGES)
def test_advantage_kwargs(name, kwargs, field, direct):
    assert refused(lambda: RunConfig(advantage=name, advantage_kwargs=kwargs), field).startswith("advantage_kwargs: ")
    if direct:
        refused(lambda: make_advantage(name, **kwargs), field)


# ----------------------------------------------------------------------------- controllers and frictions
CONTROLLERS = [
    case("gac", {"c_proj": 2}, "c_proj"), case("gac", {"c_proj": NAN}, "c_proj"), case("gac", {"c_skip": 0.1}, "c_skip"),
    case("gac", {"strength": 1.5}, "strength"), case("gac", {"strength": "all"}, "strength"),
    case("clip_grad_norm", {"max_norm": 0}, "max_norm"), case("clip_grad_norm", {"max_norm": NAN}, "max_norm"),
    case("clip_grad_norm", {"max_norm": -INF}, "max_norm"), case("ess_lr", {"floor": 0.1}, "floor"),
]
FRICTIONS = [
    case("landmine", {"p_bug": 1.5}, "p_bug"), case("landmine", {"override_prob": 0}, "override_prob"),
    case("landmine", {"penalty_std": -1}, "penalty_std"), case("landmine", {"penalty_mean": INF}, "penalty_mean"),
    case("logit_noise", {"sigma": INF}, "sigma"), case("logit_noise", {"sigma": -1}, "sigma"),
    case("logit_noise", {"sigma": NAN}, "sigma"), case("logit_noise", {"fresh": "yes"}, "fresh", False),
    case("quantized", {"bits": 1}, "bits"), case("quantized", {"bits": 17}, "bits"), case("quantized", {"bits": 8.5}, "bits"),
    case("quantized", {"bits": 0.0}, "bits"), case("quantized", {"population_dims": -1}, "population_dims"),
    case("eps_random", {"eps": 2}, "eps"), case("rare_discovery", {"p_disc": 2}, "p_disc"),
    case("poison_token", {"token": -1}, "token"), case("poison_token", {"token": 1.5}, "token"),
    case("poison_token", {"penalty": -1}, "penalty"), case("gaussian_reward", {"sigma": INF}, "sigma"),
    case("label_flip", {"p": NAN}, "p"), case("bernoulli_reward", {"p": -0.1}, "p"),
    case("precision_mismatch", {"sampler_dtype": "int4"}, "sampler_dtype"),
]


@pytest.mark.parametrize("name, kwargs, field, direct", CONTROLLERS)
def test_controller_kwargs(name, kwargs, field, direct):
    message = refused(lambda: RunConfig(controllers=(("none", {}), (name, kwargs))), field)
    assert message.startswith(f"controllers[1] {name}: ")
    if direct:
        refused(lambda: make_controller(name, **kwargs), field)


@pytest.mark.parametrize("name, kwargs, field, direct", FRICTIONS)
def test_friction_kwargs(name, kwargs, field, direct):
    assert refused(lambda: RunConfig(frictions=[(name, kwargs)]), field).startswith(f"frictions[0] {name}: ")
    if direct:
        refused(lambda: make_friction(name, **kwargs), field)


@pytest.mark.parametrize("kwargs, field", [({"kind": "x"}, "kind"), ({"D": 2.5}, "D"), ({"D": -1}, "D"),
                                           ({"p": 1.5}, "p"), ({"n_actors": 0.5}, "n_actors")])
def test_delay_schedule_directly(kwargs, field):
    refused(lambda: DelaySchedule(**kwargs), field)


# ----------------------------------------------------------------------------- the CLI's --set
CLI = [
    (["steps=1.5"], "steps"), (["seed=1.5"], "seed"), (["steps=1e3"], "steps"), (["lr=Infinity"], "lr"),
    (["lr=inf"], "lr"), (["lr=NaN"], "lr"), (["lr=-1"], "lr"), (["log_points=0"], "log_points"),
    (["task_kwargs.K=1.5"], "K"), (["task_kwargs.batch_size=0"], "batch_size"), (["estimator=dg", "estimator_kwargs.eta=-1"], "eta"),
    (["staleness.kind=fixed", "staleness.D=2.5"], "D"), (['controllers=[["gac", {"c_proj": 2}]]'], "c_proj"),
    (['frictions=[["logit_noise", {"sigma": "big"}]]'], "sigma"), (["stepz=1"], "stepz"), (["task=nope"], "task"),
    (["optimizer=adamax"], "optimizer"), (["task=gaussian_bandit", "task_kwargs.mu=NaN"], "mu"),
    (["estimator=dg", "estimator_kwargs.stochastic=maybe"], "stochastic"), (["proximal=true"], "proximal"),
]


@pytest.mark.parametrize("sets, field", CLI, ids=[" ".join(s) for s, _ in CLI])
def test_cli_set_values(sets, field):
    args = build_parser().parse_args(["run", *[a for s in sets for a in ("--set", s)]])
    refused(lambda: config_from_args(args), field)


def test_the_battery_is_large():
    n = len(RUN_CONFIG) + len(TASKS) + len(ESTIMATORS) + len(ADVANTAGES) + len(CONTROLLERS) + len(FRICTIONS) + len(CLI)
    assert n >= 200, n


def test_good_values_still_pass():
    """The sanity check of the battery: its good neighbours construct (numpy scalars included)."""
    RunConfig(task="gaussian_bandit", task_kwargs={"mu": np.float32(0.5), "sigma": 0.0, "batch_size": np.int64(4)},
              estimator="cispo", estimator_kwargs={"eps_low": INF}, advantage="constant", advantage_kwargs={"b": 0.5},
              controllers=(("clip_grad_norm", {"max_norm": INF}), ("gac", {"c_proj": -1.0, "c_skip": 1.0})),
              frictions=[("quantized", {"bits": 0}), ("logit_noise", {"sigma": 0.0, "fresh": True})],
              staleness={"kind": "geometric", "D": 3, "p": 1.0}, steps=0, lr=np.float64(1e-2))
    RunConfig(task="mnist", task_kwargs={"probes": ["dg"], "data_dir": None, "train_size": 9999})
    RunConfig(task="text_arithmetic", task_kwargs={"env_kwargs": {"modulo": 0, "digits": 6}})
