"""``sandbox reproduce --base-seed K``: every job's seeds move by K·SEED_STRIDE."""

from __future__ import annotations

import pytest

from sandbox.jobs.seeds import SEED_STRIDE, base_seed_from_env, offset_seeds
from sandbox.jobs.sweep import Job
from simulations import select


def _seeded(seed: int = 0, n: int = 3) -> int:  # a job function with a seed argument
    return seed + n


def test_offset_moves_every_seed_entry_nested_or_not():
    jobs = [Job("m:f", {"config": {"seed": 2, "steps": 5, "task_kwargs": {"seed": 1}}, "meta": {"H": 3}}, "a"),
            Job("m:f", {"seed": 0, "items": [{"seed": 4}]}, "b")]
    moved = offset_seeds(jobs, 2)
    assert moved[0].params == {"config": {"seed": 2 + 2 * SEED_STRIDE, "steps": 5,
                                          "task_kwargs": {"seed": 1 + 2 * SEED_STRIDE}}, "meta": {"H": 3}}
    assert moved[1].params == {"seed": 2 * SEED_STRIDE, "items": [{"seed": 4 + 2 * SEED_STRIDE}]}
    assert [j.label for j in moved] == ["a", "b"]
    assert jobs[0].params["config"]["seed"] == 2  # the input is not modified
    assert moved[0].id != jobs[0].id  # a different job, stored under its own id


def test_offset_fills_a_seed_argument_the_job_does_not_pass():
    job = Job(f"{__name__}:_seeded", {"n": 1})
    (moved,) = offset_seeds([job], 3)
    assert moved.params == {"n": 1, "seed": 3 * SEED_STRIDE}
    assert Job(f"{__name__}:_seeded").params == {}
    assert offset_seeds([Job("builtins:len", {"x": 1})], 1)[0].params == {"x": 1}  # no seed at all: unchanged


def test_base_seed_zero_is_the_identity_and_bad_values_raise(monkeypatch):
    jobs = [Job("m:f", {"seed": 5})]
    assert offset_seeds(jobs, 0)[0] is jobs[0]
    with pytest.raises(ValueError, match="base_seed must be an integer ≥ 0"):
        offset_seeds(jobs, -1)
    monkeypatch.setenv("SANDBOX_BASE_SEED", "2")
    assert base_seed_from_env() == 2
    monkeypatch.setenv("SANDBOX_BASE_SEED", "x")
    with pytest.raises(ValueError, match="SANDBOX_BASE_SEED must be an integer"):
        base_seed_from_env()


@pytest.mark.parametrize("name", ["reversal-learning", "all-frictions", "reference-match"])
def test_sequence_figures_get_disjoint_seeds(name):
    jobs = select([name])[0].jobs("quick")
    seeds = {j.params["config"]["seed"] for j in jobs}
    moved = {j.params["config"]["seed"] for j in offset_seeds(jobs, 1)}
    assert moved == {s + SEED_STRIDE for s in seeds} and not moved & seeds


def test_cli_base_seed_option(capsys):
    from sandbox.cli import build_parser, main

    assert build_parser().parse_args(["reproduce", "gate", "--base-seed", "2"]).base_seed == 2
    assert build_parser().parse_args(["reproduce", "gate"]).base_seed == 0
    with pytest.raises(SystemExit) as exit_:
        main(["reproduce", "gate", "--base-seed", "-1"])
    assert exit_.value.code == 2
    assert "--base-seed: must be an integer ≥ 0" in capsys.readouterr().err
