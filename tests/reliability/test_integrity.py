"""Nothing silently wrong (issue 36): every damaged byte of a stored result or of a committed data
file is named and recomputed, never used and never re-exported."""

from __future__ import annotations

import collections

import pandas as pd

from sandbox.jobs.store import ResultsStore


def test_every_single_byte_flip_of_a_stored_result_is_corrupt_or_harmless(tmp_path):
    """A flipped byte anywhere — the pandas metadata included — gives 'corrupt' (named by the
    sweep, recomputed) or a file whose verified frame, metadata and code are unchanged; never an
    exception (a KeyError 'pandas_type' used to stop every later score) and never 'stale'."""
    store = ResultsStore(tmp_path)
    frame = pd.DataFrame({"x": [0.5, 2.0], "s": ["a", "b"]})
    store.write("j", frame, {"fn": "f"})
    code, data = store.code("j"), store.path("j").read_bytes()
    outcomes = collections.Counter()
    for at in range(0, len(data), 3):  # every third byte: the whole file, in a few seconds
        damaged = bytearray(data)
        damaged[at] ^= 0x01
        store.path("j").write_bytes(bytes(damaged))
        state = store.state("j")  # must not raise
        outcomes[state] += 1
        if state == "ok":
            assert store.read("j").equals(frame) and store.metadata("j") == {"fn": "f"} and store.code("j") == code
        assert store.quick_state("j") in ("ok", "corrupt", "stale")  # must not raise either
    assert set(outcomes) <= {"ok", "corrupt"}, outcomes
    assert outcomes["corrupt"] > len(data) // 9, outcomes
