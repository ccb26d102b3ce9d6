"""The one decode loop and its teacher-forced scorer: EOS stopping and padding by hand, per-position
versions (stamps and parameters), a KV cache that refuses a version change, and a scorer that keeps
the drawn rows' log-probs and scores every other position under its own version."""

import pytest
import torch

from sandbox.core.sampling import IDENTITY, SamplingChain
from sandbox.policies.decode import Versions, decode, fresh, teacher_forced, upfront
from sandbox.policies.transformer import Transformer


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


class _Table:
    """Steps whose logits are ``params[t]`` (a [V] row per position), counting the calls."""

    calls = 0

    def __call__(self, params, answered):
        self.calls += 1
        return params[answered.shape[-1]].expand(*answered.shape[:-1], -1)


def test_versions_validate_and_stamp():
    v = Versions((3, 3, 5), {3: "a", 5: "b"})
    assert v.first == "a" and v.stamp((2, 3)).tolist() == [[3, 3, 5]] * 2
    assert Versions.single("p", 2, 7).stamps == (7, 7)
    with pytest.raises(ValueError, match="missing \\[5\\]"):
        Versions((3, 5), {3: "a"})
    with pytest.raises(ValueError, match="at least one position"):
        Versions((), {})


def test_eos_pads_the_rest_and_stops_early():
    # position 0: token 0 for u < 0.5, else token 1 (EOS); later positions always token 0
    logits = torch.tensor([[0.0, 0.0], [0.0, -1e9], [0.0, -1e9]])
    steps = _Table()
    u = torch.tensor([[0.9, 0.1, 0.1], [0.2, 0.1, 0.1]])
    out = decode(steps, Versions.single(logits, 3), IDENTITY, upfront(u), (2,), eos=1, pad=7)
    assert out.actions.tolist() == [[1, 7, 7], [0, 0, 0]]
    assert torch.allclose(out.logp, torch.tensor([[-0.6931, 0.0, 0.0], [-0.6931, 0.0, 0.0]]), atol=1e-4)
    stopped = _Table()
    done = decode(stopped, Versions.single(logits, 3), IDENTITY, upfront(torch.tensor([[0.9, 0.1, 0.1]])), (1,), eos=1)
    assert done.actions.tolist() == [[1, 0, 0]] and stopped.calls == 1  # every row stopped: no further step


def test_each_position_is_decoded_and_stamped_by_its_version():
    a, b = torch.tensor([[50.0, 0.0]] * 2), torch.tensor([[0.0, 50.0]] * 2)
    out = decode(_Table(), Versions((1, 2), {1: a, 2: b}), IDENTITY, fresh(_gen()), (4,))
    assert out.actions.tolist() == [[0, 1]] * 4
    assert out.version.tolist() == [[1, 2]] * 4


def test_fresh_uniforms_are_drawn_after_the_chain():
    """A fresh uniform is drawn once the position's distribution is known (after a hook's noise)."""
    g = _gen(3)
    chain = SamplingChain(logits_hook=lambda z: z + 0 * torch.rand(1, generator=g, dtype=z.dtype))
    out = decode(_Table(), Versions.single(torch.zeros(1, 3), 1), chain, fresh(g), (5,))
    want = _gen(3)
    torch.rand(1, generator=want)
    u = torch.rand(5, 1, generator=want)
    assert out.actions[:, 0].tolist() == (u[:, 0] * 3).floor().long().tolist()


def test_kv_cache_refuses_a_version_change_and_teacher_forcing_resumes():
    model = Transformer(vocab=3, context=6, init_std=0.3)
    old, new = model.init(1, _gen(0)), model.init(1, _gen(1))
    prompts = torch.randint(0, 3, (1, 2, 3), generator=_gen(2))
    versions = Versions((0, 0, 1), {0: old, 1: new})
    with pytest.raises(ValueError, match="KV cache holds one version"):
        model.sample(old, prompts, 2, 3, _gen(4), versions=versions)
    out = model.sample(old, prompts, 2, 3, _gen(4), cache=False, versions=versions)
    assert out.version[0, 0].tolist() == [0, 0, 1]
    logp_old, logp_new = model.answer_logp(old, prompts, out.actions), model.answer_logp(new, prompts, out.actions)
    assert torch.allclose(out.logp[..., :2], logp_old[..., :2], atol=1e-6)
    assert torch.allclose(out.logp[..., 2], logp_new[..., 2], atol=1e-6)


def test_teacher_forced_keeps_drawn_rows_and_scores_others_by_version():
    model = Transformer(vocab=3, context=6, init_std=0.3)
    old, new = model.init(1, _gen(0), torch.float64), model.init(1, _gen(1), torch.float64)
    prompts = torch.randint(0, 3, (1, 2, 3), generator=_gen(2))
    versions = Versions((0, 1, 1), {0: old, 1: new})
    drawn = model.sample(old, prompts, 2, 3, _gen(4), cache=False, versions=versions)
    forced = lambda p, a: torch.log_softmax(model.answer_logits(p, prompts, a), -1)  # noqa: E731
    logp_of = teacher_forced(forced, versions, drawn)
    assert logp_of(drawn.actions) is drawn.logp
    other = drawn.actions.clone()
    other[0, 0] = (other[0, 0] + 1) % 3
    got = logp_of(other)
    assert torch.equal(got[0, 1:], drawn.logp[0, 1:])  # rows the actor drew keep their log-probs
    want_old, want_new = model.answer_logp(old, prompts, other), model.answer_logp(new, prompts, other)
    assert torch.equal(got[0, 0, :1], want_old[0, 0, :1]) and torch.equal(got[0, 0, 1:], want_new[0, 0, 1:])
    masked = teacher_forced(forced, versions, mask_of=lambda a: a != 2)(other)
    assert torch.equal(masked, teacher_forced(forced, versions)(other).masked_fill(other == 2, 0.0))
