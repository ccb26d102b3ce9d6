"""The deployment battery of every fixture: the cells it expects on quick (and the LM cell on
standard), what each applies, the run's group size and π_old, and the template's recorded hash."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.check import Deployment, deployment_battery, prepare
from sandbox.check.deployment import CANONICAL, TEMPLATE_VERSION
from sandbox.scoring.battery import load_battery, recorded_hash

FIXTURES = Path(__file__).parent / "fixtures"
IGNORE = {"verl_grpo_token_tis.yaml": ["actor_rollout_ref.actor.use_kl_loss"]}
CONTROL = ("reversal/deploy-control", "deployment")
MNIST = ("mnist/deploy-control", "deployment")  # each environment's cells against its own control
CELLS = {
    "trl_cispo.json": [CONTROL, MNIST, ("reversal/deploy-reuse-K2", "staleness"), ("mnist/deploy-reuse-K2", "staleness"),
                       ("reversal/deploy-top-p0.95-k0-truncated", "inference engine"), ("reversal/deploy-all", "deployment")],
    "trl_dr_grpo.yaml": [CONTROL],
    "trl_gspo.yaml": [CONTROL, MNIST, ("reversal/deploy-reuse-K2", "staleness"), ("mnist/deploy-reuse-K2", "staleness")],
    "verl_dapo_async.yaml": [CONTROL, MNIST, ("reversal/deploy-reuse-K4", "staleness"), ("mnist/deploy-reuse-K4", "staleness"),
                             ("reversal/deploy-async-D17", "staleness"), ("mnist/deploy-async-D17", "staleness"),
                             ("reversal/deploy-partial-2", "inference engine"), ("reversal/deploy-all", "deployment")],
    "verl_grpo_token_tis.yaml": [CONTROL, MNIST, ("reversal/deploy-reuse-K4", "staleness"), ("mnist/deploy-reuse-K4", "staleness")],
    "verl_gspo.yaml": [CONTROL, MNIST, ("reversal/deploy-reuse-K4", "staleness"), ("mnist/deploy-reuse-K4", "staleness")],
    "verl_rollout_rs.yaml": [CONTROL, MNIST, ("reversal/deploy-reuse-K4", "staleness"), ("mnist/deploy-reuse-K4", "staleness"),
                             ("reversal/deploy-top-p0.9-k0-truncated", "inference engine"),
                             ("reversal/deploy-all", "deployment")],
}
GROUP = {"trl_cispo.json": 16, "trl_dr_grpo.yaml": 8, "trl_gspo.yaml": 8, "verl_dapo_async.yaml": 16,
         "verl_grpo_token_tis.yaml": 5, "verl_gspo.yaml": 16, "verl_rollout_rs.yaml": 8}


def _battery(name: str, battery: str = "quick", precision: str | None = "off"):
    """The fixture's deployment battery; without the mismatch cell a correcting config gets by default
    (tests/check/test_mapping_errors.py), unless ``precision`` says otherwise."""
    return prepare(FIXTURES / name, battery, IGNORE.get(name, []), precision)


@pytest.mark.parametrize("name", sorted(CELLS))
def test_each_fixture_has_its_cells(name):
    mapping, deploy, chosen = _battery(name)
    assert [(c.name, c.friction) for c in deploy.cells] == CELLS[name]
    assert (deploy.name, deploy.version, chosen.name) == ("deployment", TEMPLATE_VERSION, "quick")
    quick = {c.env: c for c in load_battery("quick").cells}
    for cell in deploy.cells:
        kwargs = cell.run["task_kwargs"]
        if cell.env == "reversal":  # the run's group size; quick's 100 samples per step kept (rounded down)
            assert kwargs["samples_per_prompt"] == GROUP[name]
            assert kwargs["prompts_per_step"] == 100 // GROUP[name]
        else:
            assert (kwargs["samples_per_context"], kwargs["batch_size"]) == (GROUP[name], 100 // GROUP[name])
        assert (cell.seeds, cell.run["steps"]) == (quick[cell.env].seeds, quick[cell.env].run["steps"])
        expected = "behavior" if "reuse" in cell.name else mapping.deployment.proximal
        assert cell.run["proximal"] == expected, cell.name


def test_what_the_async_cells_apply():
    _, deploy, _ = _battery("verl_dapo_async.yaml")
    cells = {c.name: c for c in deploy.cells}
    reuse = {"kind": "per_actor", "n_actors": 4, "D": 4}
    delay = {"kind": "uniform", "D": 17}  # 4 syncs × 4 updates, one more window's ⌈0.1·16⌉ = 2
    assert cells["reversal/deploy-reuse-K4"].run["staleness"] == reuse
    assert cells["mnist/deploy-async-D17"].run["staleness"] == delay
    assert cells["mnist/deploy-async-D17"].run["history"] == "rollouts"
    partial = cells["reversal/deploy-partial-2"].run
    assert (partial["staleness"], partial["frictions"], partial["history"]) == (
        delay, [["partial_rollouts", {"chunks": 2}]], "params")
    assert cells["reversal/deploy-all"].run["frictions"] == [["partial_rollouts", {"chunks": 2}]]
    assert all(c.run["proximal"] == "behavior" for c in deploy.cells)  # use_rollout_log_probs: π_old = μ


def test_top_p_cell_reports_what_the_engine_reports():
    _, deploy, _ = _battery("verl_rollout_rs.yaml")
    cell = next(c for c in deploy.cells if "top-p" in c.name)
    assert cell.run["frictions"] == [["truncated_sampling", {"top_p": 0.9, "top_k": 0, "report": "truncated"}]]
    assert cell.run["staleness"] == {}  # a synchronous run: no lag
    _, deploy, _ = _battery("trl_cispo.json")
    cell = next(c for c in deploy.cells if "top-p" in c.name)
    assert cell.run["frictions"][0][1]["report"] == "truncated"  # M1: TRL starts vLLM with processed log-probs
    assert next(c for c in deploy.cells if c.name == "reversal/deploy-all").run["staleness"] == {
        "kind": "per_actor", "n_actors": 2, "D": 2}


def test_precision_adds_its_cells():
    _, deploy, _ = _battery("trl_dr_grpo.yaml", precision="bf16")
    assert [c.name for c in deploy.cells] == ["reversal/deploy-control", "mnist/deploy-control",
                                              "reversal/deploy-bfloat16", "mnist/deploy-bfloat16"]
    assert deploy.cells[2].run["frictions"] == [["precision_mismatch", {"sampler_dtype": "bfloat16"}]]


def test_standard_adds_the_lm_on_ray_for_an_async_run():
    _, deploy, chosen = _battery("verl_dapo_async.yaml", battery="standard")
    lm = deploy.cells[-1]
    assert (lm.name, lm.async_config) == ("llm/deploy-ray-stale-17", {"n_workers": 1})
    assert lm.run["staleness"] == {"kind": "fixed", "D": 17}
    assert lm.run["task_kwargs"]["samples_per_prompt"] == 16 and lm.run["task_kwargs"]["prompts_per_step"] == 4
    assert deploy.cells[0].run["steps"] == 1000  # standard's budgets
    _, sync, _ = _battery("verl_gspo.yaml", battery="standard")
    assert not any(c.env == "llm" for c in sync.cells)


def test_template_hash_is_recorded_for_its_version():
    battery = deployment_battery(CANONICAL, load_battery("quick"))
    assert len(battery.cells) == 11  # every cell kind
    assert battery.hash == recorded_hash("deployment", TEMPLATE_VERSION), (
        "the deployment template changed: bump sandbox.check.deployment.TEMPLATE_VERSION and record "
        f"{battery.hash!r} in sandbox/scoring/batteries/versions.py")


def test_same_deployment_same_cells_whatever_the_loss():
    """The deployment battery depends on the deployment only: configs that share it share the
    built-ins' cached jobs."""
    a = prepare({"loss_type": "dapo", "num_generations": 8}, "quick")[1]
    b = prepare({"loss_type": "cispo", "epsilon_high": 5.0, "num_generations": 8}, "quick")[1]
    assert a.hash == b.hash


def test_bad_deployments_and_batteries_are_one_line():
    with pytest.raises(ValueError, match="deployment group must be an integer ≥ 1"):
        Deployment(group=0)
    data = {"name": "x", "version": 1, "envs": {"bandit": {"kind": "probe", "seeds": 1, "metric": "m", "random": 0,
                                                            "best": 1}},
            "cells": [{"name": "b", "env": "bandit", "friction": "actor bug"}]}
    with pytest.raises(ValueError, match="battery 'x' has no 'reversal' environment"):
        prepare({"loss_type": "dapo"}, data)
