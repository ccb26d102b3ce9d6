"""The matched regime's table (docs/regime.md): each decisive quantity of the regime's arms beside
the value published for large runs, its source and the ratio (issue 42, item 6).

Each cell is the median over seeds (all base seeds pooled) of the per-seed mean in a window:
"start" = the first ``START`` steps, "late" = the last fifth of the run. The published values are
those verified against their sources (``docs/regime.md``, Sources; [fig] read off a figure by eye,
[read] stated in text); "unknown" where no source gives one.
"""

from __future__ import annotations

import math
import re

import pandas as pd

START = 50
#: the arms' columns, in this order (``simulations.regime_runs.ARMS``)
ARM_ORDER = ("control", "bf16", "bf16-tail", "bf16-long", "lag10-tis", "lag16-seq-is", "control-long", "lag16-seq-is-long")

#: (column, label, the arm (or arms) whose value is compared, published (low, high) or None, the published text)
ROWS = (
    ("error", "error (1 − pass rate), eval", None, None, "—"),
    ("entropy", "policy entropy, nats/token", "control", None,
     "unknown: DAPO's entropy curves (arXiv 2503.14476) are not available offline"),
    ("zero_adv_frac", "zero-advantage groups", "control", None, "unknown"),
    ("update_k3", "per-update KL(π_{t−1}‖π_t), k3", "control", None,
     "unknown: no source gives it; VCPO's synchronous KL(rollout‖policy), which includes the engine "
     "mismatch, is ≈ 2.5–4e-4 on MATH [fig, mit-han-lab/vcpo figures/vcpo_results.png]"),
    ("lag_k3", "lag-10 KL(π_{t−10}‖π_t), k3", "control", (4e-4, 6e-4),
     "≈ 4–6e-4 (VCPO k = 10, MATH), ≈ 1–2e-3 (Countdown) [fig, vcpo_results.png]"),
    ("kl_k3", "sampler–learner KL(μ‖π), k3, per token", ("bf16", "bf16-tail"), (1e-3, 1e-3),
     "bf16 ≈ 1e-3 at the start, rising to ≈ 2 by step ≈ 600 before GRPO's collapse [fig, "
     "sail-sg/Precision-RL figures/verl_oat_fix.png, OAT row]; vllm-kl 5e-4–1e-3 on H20, "
     "[1e-3, 2e-2] and [2e-2, 1e-1] in pre-collapse batches [read, 'When Speed Kills Stability']"),
    ("kl_k1", "sampler–learner KL(μ‖π), k1, per token", "bf16", None, "as above (k3 only)"),
    ("seq_kl", "T·KL: per-answer Σ log μ − log π", "bf16", None,
     "bf16 sequence KL 7.64, fp16 0.32; drift −1.01 / −0.07 nats per 1,000 tokens [in-figure text, "
     "Precision-RL figures/offline_mismatch.png] — at thousands of tokens"),
    ("tail_mass", "sampled tokens with μ < 1e-3", "bf16", None, "unknown"),
    ("max_abs_dp", "max \\|π − μ\\| over sampled tokens", ("bf16", "bf16-tail"), (1.0, 1.0),
     "≈ 1 for single tokens from step 0 in bf16 (min of π − μ ≈ −1) [fig, verl_oat_fix.png, verl row]"),
    ("truncated", "truncated answers (no EOS in T)", "control", None,
     "unknown as a rate; collapsed runs run to the maximum length [read, verl #2736, #1121]"),
    ("length", "answer length, tokens", "control", None, "thousands of tokens (T here: the run's answer_len)"),
)


def _window(frame: pd.DataFrame, column: str, late: bool) -> float:
    """Median over seeds of the per-seed mean of ``column`` in the start or late window."""
    if column not in frame or frame[column].dropna().empty:
        return math.nan
    last = frame["step"].max()
    mask = frame["step"] >= 0.8 * last if late else frame["step"] <= START
    per_seed = frame[mask].groupby(["base_seed", "member"])[column].mean()
    return float(per_seed.median())


def _distance(value: float, band: tuple[float, float]) -> str:
    """'in range', or the ratio of ``value`` to the nearer end of ``band``."""
    low, high = band
    if not math.isfinite(value):
        return "—"
    return "in range" if low <= value <= high else f"{value / (low if value < low else high):.2g}×"


def _fmt(x: float) -> str:
    if not math.isfinite(x):
        return "—"
    return f"{x:.3g}" if 1e-2 <= abs(x) < 1e3 or x == 0 else f"{x:.2e}"


def table(frame: pd.DataFrame) -> str:
    """The Markdown table of ``frame`` (``simulations.regime_runs.load()``): one row per quantity,
    one column per arm (start → late), the published value, and the compared arm's distance to the
    published range at the start and late ("in range", or its ratio to the nearer end)."""
    if frame.empty:
        return "(no committed regime runs yet)"
    arms = [a for a in ARM_ORDER if a in set(frame["arm"])]
    seeds = {a: f"{frame[frame.arm == a].base_seed.nunique()}×{frame[frame.arm == a].member.nunique()}" for a in arms}
    head = "| quantity | " + " | ".join(f"{a} ({seeds[a]} seeds) start → late" for a in arms) + \
        " | published (source) | distance, start → late |"
    lines = [head, "|" + "---|" * (len(arms) + 3)]
    for column, label, compared, band, text in ROWS:
        cells = []
        for a in arms:
            sub = frame[frame.arm == a]
            cells.append(f"{_fmt(_window(sub, column, False))} → {_fmt(_window(sub, column, True))}")
        shown = [a for a in ((compared,) if isinstance(compared, str) else compared or ()) if a in arms]
        ratio = "; ".join(" → ".join(_distance(_window(frame[frame.arm == a], column, late), band)
                                     for late in (False, True)) + f" ({a})" for a in shown) if band and shown else "—"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {text} | {ratio} |")
    return "\n".join(lines)


def controls(frame: pd.DataFrame, roles: dict[str, str]) -> str:
    """The controls' verdicts (``simulations.regime``'s rules, declared before the runs), one row per
    arm and base seed: a negative control's three conditions with their numbers, a positive
    control's collapsed seeds with the exact (Clopper–Pearson) 95% interval of the rate."""
    from scipy import stats

    from simulations.regime import POSITIVE_MIN_COLLAPSED, collapsed, negative_control

    lines = ["| arm | role | base seed | seeds × steps | the rule's numbers | verdict |", "|---|---|---|---|---|---|"]
    for arm in [a for a in ARM_ORDER if a in set(frame["arm"])]:
        role = roles.get(arm, "table")
        for base, sub in frame[frame.arm == arm].groupby("base_seed"):
            size = f"{sub.member.nunique()} × {int(sub.step.max())}"
            if role == "negative":
                r = negative_control(sub)
                numbers = (f"error {r['first_error']:.3f} → {r['last_error']:.3f} (upper 95% of last − ½·first "
                           f"{r['upper']:+.3f}); min entropy {r['min_entropy']:.3f}; max zero-adv {r['max_zero_adv']:.2f}")
                failed = [k for k in ("learns", "entropy", "zero_adv") if not r[k]]
                verdict = "holds" if not failed else "fails: " + ", ".join(failed)
            elif role == "positive":
                down = collapsed(sub)
                k, n = int(down.sum()), len(down)
                ci = stats.binomtest(k, n).proportion_ci(0.95)
                numbers = f"{k} of {n} seeds collapsed (rate 95% CI [{ci.low:.2f}, {ci.high:.2f}])"
                verdict = "holds" if k >= POSITIVE_MIN_COLLAPSED else "fails: too few collapse"
            else:
                continue
            lines.append(f"| {arm} | {role} | {base} | {size} | {numbers} | {verdict} |")
    return "\n".join(lines)


def pilot_table(pilots: pd.DataFrame) -> str:
    """The pilots (``simulations.regime_runs.pilots``) as Markdown: each one's changes, the negative
    control's numbers and verdict, its early lag-10 KL, its largest |π − μ| and its collapsed seeds."""
    lines = ["| pilot (base seed 5, 4 seeds) | made at | error first → last | min entropy | max zero-adv | "
             "lag-10 KL, steps ≤ 200 | max \\|π − μ\\| | collapsed (positive rule) | the negative control's rule |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in pilots.itertuples():
        failed = [k for k in ("learns", "entropy", "zero_adv") if not getattr(r, k)]
        lines.append(f"| `{r.pilot}` | `{r.commit}` | {r.first_error:.3f} → {r.last_error:.3f} | {r.min_entropy:.3f} | "
                     f"{r.max_zero_adv:.2f} | {r.lag10_k3_early:.2e} | {r.max_gap:.2g} | {r.collapsed} of {r.seeds} | "
                     f"{'holds' if not failed else 'fails: ' + ', '.join(failed)} |")
    return "\n".join(lines)


#: docs/regime.md's generated blocks, each between ``<!-- MARKER: … -->`` and ``<!-- /MARKER -->``
DOC_MARKERS = ("regime-pilots", "regime-table", "regime-controls")


def doc_block(page: str, marker: str) -> str | None:
    """The text between ``marker``'s comments in ``page`` (None when the markers are missing)."""
    found = re.search(rf"<!-- {marker}:[^>]*-->\n(.*?)\n<!-- /{marker} -->", page, re.S)
    return found.group(1) if found else None


def refresh_docs(page: str, blocks: dict[str, str]) -> str:
    """``page`` with each generated block (``blocks``: marker → text) rewritten."""
    for marker, text in blocks.items():
        if doc_block(page, marker) is None:
            raise ValueError(f"the page must hold the markers of {marker!r} once")
        page = re.sub(rf"(<!-- {marker}:[^>]*-->\n)(.*?)(\n<!-- /{marker} -->)",
                      lambda m: m.group(1) + text.strip() + m.group(3), page, count=1, flags=re.S)
    return page


__all__ = ["ARM_ORDER", "DOC_MARKERS", "ROWS", "START", "controls", "doc_block", "pilot_table", "refresh_docs", "table"]


#: the trajectories the figure shows: (column, title, log scale)
PANELS = (("error", "error (eval)", False), ("entropy", "entropy, nats/token", False),
          ("zero_adv_frac", "zero-advantage groups", False), ("kl_k3", "KL(μ‖π) per token, k3", True),
          ("lag_k3", "lag-10 KL, k3", True), ("truncated", "truncated answers", False))


def plot(frame: pd.DataFrame, path) -> None:
    """The arms' trajectories (median over seeds, the band from the 25th to the 75th percentile)
    of ``PANELS``, written to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(13, 6.5), constrained_layout=True)
    for ax, (column, title, log) in zip(axes.flat, PANELS):
        for arm, sub in frame.groupby("arm", sort=False):
            data = sub.dropna(subset=[column])
            if data.empty:
                continue
            every = 10 if column not in ("error", "entropy", "lag_k3") else 1
            q = data.groupby("step")[column].quantile([0.25, 0.5, 0.75]).unstack()
            q = q.iloc[::every] if every > 1 else q
            q = q.rolling(5, min_periods=1).mean() if every > 1 else q
            ax.plot(q.index, q[0.5], label=arm)
            ax.fill_between(q.index, q[0.25], q[0.75], alpha=0.2)
        ax.set_title(title)
        ax.set_xlabel("learner step")
        if log:
            ax.set_yscale("log")
    axes.flat[0].legend()
    fig.savefig(path, dpi=110)
    plt.close(fig)


__all__ += ["PANELS", "plot"]
