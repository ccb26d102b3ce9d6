"""One framework version per reading (issue 45, item 1): every default the check reads for verl
0.9.1, TRL 1.16.0's GRPOConfig and its AsyncGRPOConfig is that version's own — read from the
installed package's config files and dataclasses, not restated — and every field of those
dataclasses is read, inert, refused or infrastructure in that reading."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

from sandbox.check import map_config, trl, trl_async, verl
from sandbox.check.mapping import _is_infrastructure
from sandbox.check.readers import read_config

from .required import require


def _close(ours, theirs) -> bool:
    return ours == theirs and (isinstance(ours, bool) == isinstance(theirs, bool))


def test_verl_091_defaults_are_its_own():
    """The ppo trainer's defaults from 0.9.1's generated config; the async trainer's from its
    fully-async YAML; the disaggregated trainers' bypass_mode/calculate_log_probs defaults from theirs."""
    verl_pkg = require("verl")
    assert verl_pkg.__version__ == "0.9.1"
    root = Path(verl_pkg.__file__).parent
    _, generated, _ = read_config(root / "trainer" / "config" / "_generated_ppo_trainer.yaml")
    from omegaconf import OmegaConf

    async_yaml = OmegaConf.to_container(OmegaConf.load(root / "experimental" / "fully_async_policy" / "config" /
                                                       "fully_async_ppo_trainer.yaml"))
    off_yaml = OmegaConf.to_container(OmegaConf.load(root / "experimental" / "one_step_off_policy" / "config" /
                                                     "one_step_off_ppo_trainer.yaml"))
    for key, ours in verl.DEFAULTS.items():
        if key.startswith("async_training."):
            theirs = async_yaml["async_training"][key.split(".", 1)[1]]
        else:
            assert key in generated, f"{key} is not a verl 0.9.1 key"
            theirs = generated[key]
        assert ours == theirs, (key, ours, theirs)
    for trainer in (async_yaml, off_yaml):  # what _trainer overrides for the disaggregated trainers
        assert trainer["algorithm"]["rollout_correction"]["bypass_mode"] is True
        assert trainer["actor_rollout_ref"]["rollout"]["calculate_log_probs"] is True
    assert "compute_prox_log_prob" not in async_yaml["async_training"]  # b178a3c's key: not 0.9.1's
    assert "use_rollout_log_probs" not in async_yaml["async_training"]


def test_trl_116_grpo_defaults_are_its_own():
    trl_pkg = require("trl")
    assert trl_pkg.__version__ == "1.16.0"
    from trl import GRPOConfig

    fields = {f.name: f for f in dataclasses.fields(GRPOConfig)}
    for key, ours in trl.DEFAULTS.items():
        assert key in fields, key
        assert _close(ours, fields[key].default), (key, ours, fields[key].default)


def test_trl_116_async_grpo_config_is_read_in_full():
    require("trl")
    from trl.experimental.async_grpo import AsyncGRPOConfig

    fields = {f.name: f for f in dataclasses.fields(AsyncGRPOConfig)}
    for key, ours in trl_async.DEFAULTS.items():
        assert _close(ours, fields[key].default), (key, ours, fields[key].default)
    schema = trl_async.SCHEMA
    unread = [k for k in fields if k not in schema.defaults and k not in schema.inert and k not in schema.refused
              and not _is_infrastructure(k, schema)]
    assert unread == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = AsyncGRPOConfig(output_dir="/tmp/async-grpo-check", use_cpu=True, bf16=False, report_to="none",
                                 epsilon_high=0.28, max_staleness=2)
    mapping = map_config(config)  # the object: told by its type, no --trainer
    assert mapping.version.startswith("TRL 1.16.0 (AsyncGRPOConfig")
    assert mapping.deployment.proximal == "behavior" and mapping.deployment.delay == {"kind": "uniform", "D": 2}
    assert mapping.recipe.estimator_kwargs["eps_high"] == 0.28
