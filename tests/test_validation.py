"""The validation helpers (sandbox.core.validation) and the validated RunConfig (issue 13, items 1, 10, 12)."""

from __future__ import annotations

import gzip
import math

import numpy as np
import pytest
import torch

from sandbox.advantages import make_advantage
from sandbox.controllers import make_controller
from sandbox.core.validation import (
    NonFiniteError,
    check_choice,
    check_int,
    check_range,
    check_tensor,
    short_repr,
)
from sandbox.envs.mnist import find_test_split
from sandbox.estimators import make_estimator
from sandbox.estimators.base import PGTerms
from sandbox.frictions import make_friction
from sandbox.runtime.config import RunConfig
from sandbox.tasks import make_task

SHARED = find_test_split()  # the folder of the official MNIST test split, or None


# ----------------------------------------------------------------------------- helpers
@pytest.mark.parametrize("value", [0, 7, np.int64(7), np.int8(-3), np.uint16(2)])
def test_check_int_accepts_python_and_numpy_integers(value):
    check_int("n", value)


@pytest.mark.parametrize("value, kind", [(1.5, "float"), (2.0, "float"), (True, "bool"), (np.bool_(True), "bool"),
                                         ("3", "str"), (None, "NoneType"), (np.float32(2.0), "float32"),
                                         (torch.tensor(3), "Tensor")])
def test_check_int_refuses_non_integers(value, kind):
    with pytest.raises(ValueError, match=rf"^n must be an integer, got {kind}"):
        check_int("n", value)


def test_check_int_range_and_none():
    check_int("n", None, allow_none=True)
    check_int("n", 3, low=3, high=3)
    check_int("n", 10**400, low=0, high=10**500)  # too large for a float, still an integer
    with pytest.raises(ValueError, match=r"^n must lie within ±2\*\*62 \(an int64"):  # unbounded above: int64
        check_int("n", 10**400, low=0)
    with pytest.raises(ValueError, match=r"^n must lie in \[0, 10\]"):
        check_int("n", -(10**400), low=0, high=10)
    with pytest.raises(ValueError, match=r"n must lie in \[1, inf\], got 0"):
        check_int("n", 0, low=1)


@pytest.mark.parametrize("value", [0.5, 1, np.float32(0.5), np.float64(0.5), np.int32(1), np.float16(0.25)])
def test_check_range_accepts_numpy_scalars(value):
    check_range("x", value, low=0.0, high=1.0)


def test_check_range_refuses_non_finite_unless_told():
    with pytest.raises(ValueError, match="x must be a finite number, got inf"):
        check_range("x", math.inf, low=0.0)
    with pytest.raises(ValueError, match="x must be a finite number, got -inf"):
        check_range("x", -math.inf)
    with pytest.raises(ValueError, match="x must be a finite number, got inf"):
        check_range("x", np.float32("inf"))
    check_range("x", math.inf, low=0.0, finite=False)  # a cap: ∞ means "no cap"
    for finite in (True, False):  # NaN is never a value
        with pytest.raises(ValueError, match=r"x must lie in \[0.0, inf\], got nan"):
            check_range("x", math.nan, low=0.0, finite=finite)


@pytest.mark.parametrize("value", [True, np.bool_(False), "0.5", None, [0.5], torch.tensor(0.5)])
def test_check_range_refuses_non_numbers(value):
    with pytest.raises(ValueError, match="^x must be a number, got"):
        check_range("x", value)


def test_messages_stay_on_one_line():
    big = torch.arange(1000.0).reshape(100, 10)  # its repr spans many lines
    for call in (lambda: check_range("x", big), lambda: check_int("x", big), lambda: check_choice("x", big, ("a",))):
        with pytest.raises(ValueError) as err:
            call()
        assert "\n" not in str(err.value) and len(str(err.value)) < 120
    assert short_repr("a\nb") == "'a\\nb'" and len(short_repr(list(range(100)))) == 60


def test_check_choice_with_unhashable_value():
    with pytest.raises(ValueError, match=r"mode must be one of \['a', 'b'\], got \['a'\]"):
        check_choice("mode", ["a"], ("a", "b"))


# ----------------------------------------------------------------------------- item 1: RunConfig
def test_fractional_steps_and_seed_fail_at_construction():
    """steps=1.5 used to loop forever (the loop stops at step == steps); seed=1.5 ran seed 1."""
    with pytest.raises(ValueError, match="^steps must be an integer, got float 1.5$"):
        RunConfig(steps=1.5)
    with pytest.raises(ValueError, match="^seed must be an integer, got float 1.5$"):
        RunConfig(seed=1.5)
    with pytest.raises(ValueError, match="^steps must be an integer, got bool True$"):
        RunConfig(steps=True)


@pytest.mark.parametrize("changes, message", [
    ({"lr": math.inf}, "lr must be a finite number, got inf"),
    ({"task": "gaussian_bandit", "task_kwargs": {"mu": math.nan}}, r"task_kwargs: mu must lie in \[-inf, inf\], got nan"),
    ({"advantage": "constant", "advantage_kwargs": {"b": math.inf}}, "advantage_kwargs: b must be a finite number"),
    ({"task": "gaussian_bandit", "task_kwargs": {"sigma": math.inf}}, "task_kwargs: sigma must be a finite number"),
    ({"task_kwargs": {"init_std": math.inf}}, "task_kwargs: init_std must be a finite number"),
    ({"estimator": "dg", "estimator_kwargs": {"eta": -1}}, r"estimator_kwargs: eta must lie in \[0.0, inf\], got -1"),
])
def test_values_that_used_to_run_as_diverged_fail_before_training(changes, message):
    with pytest.raises(ValueError, match=f"^{message}"):
        RunConfig(**changes)


def test_run_ids_are_unchanged_and_numpy_values_hash_like_python_ones():
    """Ids computed on main before validation existed: validating must not rename any result."""
    assert RunConfig(lr=1e-3).run_id == "5c1c84f842935ff3"  # the old defaults, now the bandit's are lr 0.1
    assert RunConfig().lr == 0.1 and RunConfig().advantage == "group_mean" and RunConfig().optimizer == "adam"
    assert RunConfig(seed=3, steps=7, lr=0.5, label="x").run_id == "4f032c35ca8f27d1"
    cfg = RunConfig(task="sequences", task_kwargs={"H": 3, "width": 32}, lr=1e-3, estimator="dg", estimator_kwargs={"eta": 0.5},
                    controllers=(("gac", {"c_proj": 0.2}),), frictions=[("logit_noise", {"sigma": 1.0})],
                    staleness={"kind": "fixed", "D": 2})
    assert cfg.run_id == "2c617e6f48cd679a"
    assert RunConfig.from_dict({"controllers": [["clip_grad_norm", {"max_norm": 2.0}]], "estimator": "cispo", "lr": 1e-3}).run_id \
        == "bf87c57fb5378bc1"
    numpy_cfg = RunConfig(task="sequences", task_kwargs={"H": np.int64(3), "width": np.int32(32)}, lr=1e-3, estimator="dg",
                          estimator_kwargs={"eta": np.float64(0.5)}, controllers=(("gac", {"c_proj": np.float64(0.2)}),),
                          frictions=[("logit_noise", {"sigma": np.float32(1.0)})],
                          staleness={"kind": "fixed", "D": np.int64(2)})
    assert numpy_cfg.run_id == cfg.run_id and numpy_cfg == cfg
    assert type(numpy_cfg.task_kwargs["H"]) is int and type(RunConfig(seed=np.int64(3)).seed) is int
    assert RunConfig.from_dict(cfg.to_dict()) == cfg


def test_mnist_reads_no_images_to_validate_a_config(tmp_path):
    """MNIST must not read its images to validate a config (only when the run is built)."""
    cfg = RunConfig(task="mnist", task_kwargs={"split": "full", "download": False, "data_dir": str(tmp_path)})
    task = make_task(cfg.task, **cfg.task_kwargs)
    assert "data" not in vars(task)  # not read yet
    with pytest.raises(ValueError, match="not found"):
        task.init_params(torch.Generator().manual_seed(0))  # read (and missing) before the first step


# ----------------------------------------------------------------------------- item 10: raw MNIST files
@pytest.mark.skipif(SHARED is None, reason="needs the MNIST test split")
def test_raw_mnist_files_are_md5_checked(tmp_path, monkeypatch):
    """A raw (gunzipped) file with the right header shape but changed content is refused like a gzip one."""
    from sandbox.envs import mnist as mn

    monkeypatch.delenv("SANDBOX_MNIST_DIR", raising=False)
    raw = gzip.decompress((SHARED / "t10k-labels-idx1-ubyte.gz").read_bytes())
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(raw)
    assert mn.find_file("test", "labels", tmp_path, download_missing=False) == tmp_path / "t10k-labels-idx1-ubyte"
    corrupted = bytearray(raw)
    corrupted[-1] = (corrupted[-1] + 1) % 10  # one label changed: still a valid IDX file of 10k labels
    assert tuple(mn.parse_idx(bytes(corrupted)).shape) == (10000,)
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(bytes(corrupted))
    with pytest.raises(mn.ChecksumError, match="27ae3e4e09519cfbb04c329615203637") as err:
        mn.find_file("test", "labels", tmp_path, download_missing=False)
    assert "\n" not in str(err.value)


# ----------------------------------------------------------------------------- item 12
def test_numpy_scalars_are_numbers_everywhere():
    assert make_estimator("dg", eta=np.float32(0.5)).eta == np.float32(0.5)
    assert make_friction("logit_noise", sigma=np.float32(0.5)).active
    assert make_controller("gac", c_proj=np.float32(0.2)).c_proj == np.float32(0.2)
    assert make_advantage("constant", b=np.float64(0.5)).b == 0.5
    assert make_task("bandit", K=np.int64(5), population=np.int32(2)).n_actions == 5
    logp = torch.log(torch.full((4, 1), 0.5, requires_grad=True))
    out = make_estimator("dg", eta=np.float32(0.5))(PGTerms(logp=logp, advantages=torch.tensor([1.0, -1.0, 0.5, 0.0])))
    assert torch.isfinite(out.loss)
    assert RunConfig(lr=np.float32(0.5)).lr == 0.5 and RunConfig(lr=np.float32(0.5)).run_id == RunConfig(lr=0.5).run_id


@pytest.mark.parametrize("shape", [(0, 1), (3, 0), (0, 0, 1)])
def test_empty_batches_are_refused(shape):
    """B = 0 used to give loss 0 silently."""
    logp = torch.zeros(shape, requires_grad=True)
    with pytest.raises(ValueError, match="^logp is empty"):
        make_estimator("reinforce")(PGTerms(logp=logp, advantages=torch.zeros(shape[:-1])))


@pytest.mark.parametrize("shape", [(0,), (2, 0)])
def test_empty_reward_batches_are_refused(shape):
    with pytest.raises(ValueError, match=r"^rewards must have shape \[\*P, B\] with B ≥ 1"):
        make_advantage("group_mean")(torch.zeros(shape))


def test_min_variance_refuses_negative_or_non_finite_weights():
    """Negative squared norms used to give a baseline of 1.7e38."""
    rewards, group = torch.tensor([1.0, 0.0, 1.0, 0.0]), torch.tensor([0, 0, 1, 1])
    rho = torch.ones(4)
    mv = make_advantage("min_variance")
    with pytest.raises(ValueError, match="^grad_sq_norms must be ≥ 0 everywhere, got a minimum of -1"):
        mv(rewards, group, rho=rho, grad_sq_norms=torch.tensor([1.0, -1.0, 1.0, 1.0]))
    with pytest.raises(NonFiniteError, match="^grad_sq_norms contains NaN or inf"):
        mv(rewards, group, rho=rho, grad_sq_norms=torch.tensor([1.0, math.inf, 1.0, 1.0]))
    with pytest.raises(ValueError, match="^rho must be ≥ 0 everywhere"):
        make_advantage("min_variance", weights="rho2")(rewards, group, rho=torch.tensor([1.0, -0.5, 1.0, 1.0]))
    ok = mv(rewards, group, rho=rho, grad_sq_norms=torch.tensor([1.0, 3.0, 1.0, 1.0]))
    assert torch.allclose(ok, torch.tensor([0.75, -0.25, 0.5, -0.5]))  # b* = (1·1 + 3·0)/4 = 0.25


@pytest.mark.parametrize("name", ["gac", "clip_grad_norm", "ess_lr", "none"])
def test_controllers_refuse_integer_gradients(name):
    with pytest.raises(ValueError, match=r"^grads\[1\] must have a float dtype, got torch.int64"):
        make_controller(name).step([torch.ones(2, 3), torch.ones(2, 2, dtype=torch.long)], population_shape=(2,))


def test_caps_at_infinity_mean_no_cap():
    """∞ stays valid where it means "no cap": the loss equals that of an unreachable finite cap."""
    gen = torch.Generator().manual_seed(0)
    logp = torch.log(torch.rand(3, 6, 2, generator=gen) * 0.9 + 0.05).requires_grad_(True)
    behavior = torch.log(torch.rand(3, 6, 2, generator=gen) * 0.9 + 0.05)
    terms = PGTerms(logp=logp, advantages=torch.randn(3, 6, generator=gen), behavior_logp=behavior)
    for name, field in [("tis", "C"), ("awr", "w_max"), ("vtrace_pg", "rho_bar"), ("decoupled_ppo", "k_max"),
                        ("mis", "beta"), ("m2po", "tau"), ("ppo", "eps_high"), ("cispo", "eps_low")]:
        at_inf = make_estimator(name, **{field: math.inf})(terms).loss
        assert torch.isfinite(at_inf), name
        assert torch.allclose(at_inf, make_estimator(name, **{field: 1e30})(terms).loss), name
    grads = [torch.randn(2, 5, generator=gen)]
    out = make_controller("clip_grad_norm", max_norm=math.inf).step(grads, population_shape=(2,))
    assert torch.equal(out.grads[0], grads[0])


def test_fused_logprob_accepts_numpy_integers():
    from sandbox.kernels import fused_logprob

    gen = torch.Generator().manual_seed(0)
    hidden, weight = torch.randn(5, 4, generator=gen), torch.randn(7, 4, generator=gen)
    targets = torch.tensor([0, 6, -100, 3, 2])
    plain = fused_logprob(hidden, weight, targets, chunk_size=2, ignore_index=-100, backend="torch")
    numpy = fused_logprob(hidden, weight, targets, chunk_size=np.int64(2), ignore_index=np.int32(-100), backend="torch")
    assert torch.equal(plain, numpy)


def test_non_finite_values_raise_a_typed_value_error():
    # divergence is a type callers can catch (the scorecard's probes count it), still a ValueError
    assert issubclass(NonFiniteError, ValueError)
    with pytest.raises(NonFiniteError, match="^x contains NaN or inf"):
        check_tensor("x", torch.tensor([0.0, math.nan]), dtype="float")
    with pytest.raises(ValueError, match="must have a float dtype") as err:
        check_tensor("x", torch.tensor([1]), dtype="float")
    assert not isinstance(err.value, NonFiniteError)
