"""Statistics on scipy, claims that can fail, and the atomic results store."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from sandbox.analysis.claim_table import format_claims
from sandbox.analysis.claims import ClaimBook, load_claims
from sandbox.analysis.stats import bootstrap_ci, iqm, paired_difference_ci
from sandbox.jobs.store import ResultsStore


def test_iqm_hand_computed():
    # 8 values: drop 2 lowest and 2 highest → mean(3, 4, 5, 6) = 4.5
    assert iqm([1, 2, 3, 4, 5, 6, 7, 100]) == pytest.approx(4.5)


def test_bootstrap_ci_covers_the_mean_of_normal_data():
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(60):
        x = rng.normal(1.0, 2.0, size=40)
        iv = bootstrap_ci(x, n_resamples=500, seed=1)
        hits += iv.low <= 1.0 <= iv.high
        assert iv.low <= x.mean() <= iv.high
    assert hits >= 50  # nominal 95%: 57 of 60 expected; well above chance


def test_bootstrap_degenerate_and_nan():
    iv = bootstrap_ci([2.0, 2.0, 2.0])
    assert (iv.estimate, iv.low, iv.high) == (2.0, 2.0, 2.0)
    assert bootstrap_ci([1.0, np.nan, 3.0]).estimate == pytest.approx(2.0)
    with pytest.raises(ValueError, match="at least one non-NaN"):
        bootstrap_ci([np.nan])
    with pytest.raises(ValueError, match="statistic must be one of"):
        bootstrap_ci([1.0, 2.0], statistic="mode")


def test_paired_difference_removes_shared_variation():
    rng = np.random.default_rng(3)
    shared = rng.normal(0, 10, size=30)
    a, b = shared + 0.5 + rng.normal(0, 0.1, 30), shared + rng.normal(0, 0.1, 30)
    iv = paired_difference_ci(a, b)
    assert 0.3 < iv.low < iv.high < 0.7
    with pytest.raises(ValueError, match="same length"):
        paired_difference_ci([1.0, 2.0], [1.0])


def test_claims_pass_and_fail(tmp_path):
    path = tmp_path / "claims.json"
    book = ClaimBook("fig", path=path)
    rng = np.random.default_rng(0)
    def draw():  # every claim its own measurement (one measurement is one row: claim_audit)
        return rng.normal(0, 1, 50), rng.normal(1, 1, 50)

    lo, hi = draw()
    assert book.less("lower", "lo < hi", lo, hi).passed
    lo, hi = draw()
    assert not book.less("not-lower", "hi < lo", hi, lo).passed
    lo, hi = draw()
    assert book.greater("greater", "hi > lo", hi, lo).passed
    assert book.below("below", "mean < 2", lo, 2.0).passed
    lo, hi = draw()
    assert not book.above("above", "mean > 2", lo, 2.0).passed
    assert book.close("close", "≈", [1.0, 1.0 + 1e-10], 1.0, tol=1e-9).passed
    assert not book.exact("exact", "false", 3.0, False).passed
    saved = load_claims(path)
    assert [c.name for c in saved] == [c.name for c in book.claims] and len(json.loads(path.read_text())["data"]) == 7
    table = format_claims(saved)
    assert "FAIL" in table and "PASS" in table
    with pytest.raises(AssertionError, match="3 claim\\(s\\) failed"):
        book.check()
    with pytest.raises(AssertionError, match="no claims were recorded"):
        ClaimBook("empty").check(require_asserted=False)


def test_reported_claims_are_shown_but_not_asserted():
    book = ClaimBook("fig")
    rng = np.random.default_rng(1)
    weak = book.less("weak", "a < b (noisy)", rng.normal(0, 1, 6), rng.normal(0.1, 1, 6))
    info = book.report(weak)
    assert info.passed is None and book.claims == [info] and "reported, not asserted" in info.detail
    assert "INFO" in book.table()
    with pytest.raises(AssertionError, match="no claims were asserted"):
        book.check()  # a figure must assert something …
    book.check(require_asserted=False)  # … unless it is descriptive: every claim reported
    book.exact("real", "holds", 1.0, True)
    book.check()


def test_store_roundtrip_and_atomicity(tmp_path):
    store = ResultsStore(tmp_path)
    frame = pd.DataFrame({"step": [0, 1], "x": [0.5, 0.25]})
    store.write("abc", frame, {"fn": "f", "params": {"a": 1}})
    assert store.exists("abc") and store.read("abc").equals(frame)
    assert store.metadata("abc") == {"fn": "f", "params": {"a": 1}}
    assert store.job_ids() == ["abc"]
    assert not list(tmp_path.glob("*.tmp"))  # the temporary file was renamed into place
    with pytest.raises(ValueError, match="no results for job zzz"):
        store.read("zzz")


def test_a_row_without_an_estimate_says_so_instead_of_printing_nan():
    from sandbox.analysis.claim_table import interval_text

    assert interval_text(float("nan"), float("nan"), float("nan")) == "no estimate"
    assert interval_text(0.5, 0.25, 0.75) == "0.5 [0.25, 0.75]"
    assert interval_text(2.0, 2.0, 2.0) == "2"


def test_a_labelled_row_says_what_its_number_is():
    """A collapse contrast's number is Fisher's p: six rows reading a bare "1" said nothing."""
    from sandbox.analysis.claim_table import Claim, from_dict

    c = Claim("f", "n", "s", 1.0, 1.0, 1.0, False, label="Fisher p")
    assert c.interval == "Fisher p = 1"
    assert Claim("f", "n", "s", 0.5, 0.25, 0.75, False).interval == "0.5 [0.25, 0.75]"
    assert Claim("f", "n", "s", float("nan"), float("nan"), float("nan"), False, label="Fisher p").interval == "no estimate"
    old = {k: v for k, v in dataclasses.asdict(c).items() if k != "label"}  # a file written before the field
    assert from_dict(old).interval == "1"
