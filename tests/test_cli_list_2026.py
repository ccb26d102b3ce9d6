"""``sandbox list`` shows the 2026 zoo (issue 16): every new estimator, advantage and friction with
its defaults, and the frictions-2026 figure; every registered friction is listed."""

from __future__ import annotations

from sandbox.cli import main
from sandbox.frictions import FRICTIONS

ESTIMATORS_2026 = ("dppo", "two_sided_ppo", "sat", "rollout_rs", "gmpo", "gspo_token", "luspo", "vespo", "clip_cov",
                   "kl_cov", "topr", "tpo")
ADVANTAGES_2026 = ("maxrl", "reinforce_pp")
FRICTIONS_2026 = ("truncated_sampling", "partial_rollouts")


def _table(out: str, title: str) -> str:
    """The block of ``sandbox list`` under ``title`` (up to the next blank line)."""
    start = out.index(f"{title} (")
    return out[start:out.index("\n\n", start)]


def test_list_shows_the_2026_zoo_with_defaults(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    estimators, advantages, frictions = (_table(out, t) for t in ("Estimators", "Advantages", "Frictions"))
    for name in ESTIMATORS_2026:
        assert f"\n  {name} " in estimators, name
    for name in ADVANTAGES_2026:
        assert f"\n  {name} " in advantages, name
    for name in (*FRICTIONS_2026, *FRICTIONS.names()):
        assert f"\n  {name} " in frictions, name
    assert "kl_coef=0.001" in estimators  # DPPO's squared-log-ratio term, on by default
    assert "report='truncated'" in frictions and "chunks=1" in frictions  # the frictions' defaults
    assert "\n  frictions-2026 " in _table(out, "Figures")


def _row(table: str, name: str) -> str:
    """One entry of a ``sandbox list`` table: its name line and the indented lines under it."""
    start = table.index(f"\n  {name} ") + 1
    end = next((i for i in range(start + 1, len(table)) if table.startswith("\n  ", i) and table[i + 3] != " "),
               len(table))
    return " ".join(table[start:end].split())


def test_list_marks_sat_provisional(capsys):
    assert main(["list", "estimators"]) == 0
    sat = _row(capsys.readouterr().out, "sat")
    assert sat.startswith("sat PROVISIONAL") and "Hill kernel relative to the quantile" in sat


def test_list_one_table_holds_the_new_frictions(capsys):
    assert main(["list", "frictions"]) == 0
    out = capsys.readouterr().out
    assert all(f"  {name} " in out for name in FRICTIONS_2026) and "Estimators" not in out


def test_list_shows_every_staleness_admission_policy(capsys):
    from sandbox.cli import admission_docs, main
    from sandbox.frictions.staleness import ADMISSIONS

    assert tuple(admission_docs()) == ADMISSIONS and all(admission_docs().values())
    assert main(["list", "frictions"]) == 0
    out = capsys.readouterr().out
    assert "Staleness admission policies" in out
    assert all(f"  {name}  " in out for name in ADMISSIONS)
    assert "Staleness delay kinds" in out and "d ~ U{0..D}, independently per step." in out


def test_list_shows_the_authors_defaults_where_they_differ(capsys):
    assert main(["list", "estimators"]) == 0
    out = capsys.readouterr().out
    assert "authors: eps_low = eps_high = 1" in _row(out, "clip_cov")
    assert "authors: ratio = 2e-3 (7B) or 2e-4 (32B), coef = 1" in _row(out, "kl_cov")
    assert "authors: delta_low = delta_high = 0.15" in _row(out, "dppo")
    assert "authors: not found" in _row(out, "cispo")
    assert "authors: as ours" in _row(out, "rollout_rs")
    assert "authors:" not in _row(out, "reinforce")  # only where we checked
