"""One plotting style for every figure; figures are written as PNG and PDF."""

from __future__ import annotations

import hashlib
import os
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use(os.environ.get("MPLBACKEND", "Agg"))
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from sandbox.analysis.stats import mean_ci_over_seeds  # noqa: E402

#: one colour per method, the same in every figure: every registered estimator and every scoring
#: recipe has its own (tests/analysis/test_plotting.py checks that none is shared). Aliases of one
#: method share its colour: pg = reinforce, ess_lr = vcpo (its step controller), ce = xent.
METHOD_COLORS = {
    "reinforce": "#7f7f7f", "pg": "#4d4d4d", "is_pg": "#1f77b4", "tis": "#17becf", "mis": "#9edae5",
    "ppo": "#ff7f0e", "decoupled_ppo": "#ffbb78", "pmpo": "#8c564b", "vcpo": "#2ca02c", "ess_lr": "#2ca02c",
    "gac": "#9467bd", "dg": "#d62728", "kondo": "#e377c2", "xent": "#000000", "ce": "#000000",
    "prob_gate": "#bcbd22", "cispo": "#c5b0d5", "gspo": "#c49c94", "vtrace_pg": "#aec7e8",
    # the 2026 zoo and the other registered estimators (matplotlib's tab20b and the rest of tab20)
    "dppo": "#393b79", "vespo": "#e7ba52", "luspo": "#637939", "gmpo": "#843c39", "tpo": "#7b4173",
    "sapo": "#5254a3", "m2po": "#8ca252", "opsm": "#bd9e39", "clip_cov": "#ad494a", "kl_cov": "#d6616b",
    "sat": "#a55194", "topr": "#6b6ecf", "two_sided_ppo": "#8c6d31", "gspo_token": "#e7969c",
    "rollout_rs": "#98df8a", "awr": "#ce6dbd",
}
#: colours for methods not in the table (a plugin's), chosen by a stable hash of the name
EXTRA_COLORS = ("#9c9ede", "#b5cf6b", "#cedb9c", "#e7cb94", "#de9ed6", "#ff9896", "#f7b6d2", "#c7c7c7",
                "#dbdb8d", "#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363")

DEFAULT_FIGURES = Path(os.environ.get("SANDBOX_FIGURES", "paper_figures"))


def use_style() -> None:
    plt.rcParams.update({
        "figure.dpi": 110, "savefig.dpi": 150, "font.size": 9, "axes.titlesize": 10,
        "axes.labelsize": 9, "legend.fontsize": 8, "axes.spines.top": False, "axes.spines.right": False,
        "axes.grid": True, "grid.alpha": 0.25, "lines.linewidth": 1.6, "figure.constrained_layout.use": True,
    })


def color(method: str) -> str:
    """The method's colour (its label's first word, lower-cased: 'DPPO (ε=0.2)' → dppo); a method
    the table does not know gets one of ``EXTRA_COLORS`` by a hash of its name, the same in every
    process (Python's ``hash`` of a string is not)."""
    key = method.split("(")[0].split(" ")[0].lower()
    if key in METHOD_COLORS:
        return METHOD_COLORS[key]
    return EXTRA_COLORS[int(hashlib.sha256(key.encode()).hexdigest(), 16) % len(EXTRA_COLORS)]


#: what a band shows, per statistic (``mean_ci_over_seeds``)
BAND_KIND = {"mean": "95% t-intervals of the mean", "iqm": "95% bootstrap (BCa) intervals of the IQM",
             "median": "95% bootstrap (BCa) intervals of the median"}


#: the range of bounded metrics, for ``within_range`` (``bounds=`` of ``band`` and ``curve``)
METRIC_RANGES = {"error": (0.0, 1.0), "accuracy": (0.0, 1.0), "score": (0.0, 1.0), "ess_frac": (0.0, 1.0),
                 "signal_fraction": (0.0, 1.0), "cosine": (-1.0, 1.0)}


def within_range(fig, low, high, bounds: tuple[float, float] | str | None):
    """An interval's ends ``low, high`` kept within a bounded metric's range ``bounds`` ((lo, hi) or
    a ``METRIC_RANGES`` name: an error in [0, 1], a cosine in [−1, 1]); when an end crossed it, the
    figure remembers, and ``save_figure``'s footer says the intervals were clipped to the range.
    ``None`` returns them unchanged."""
    if bounds is None:
        return low, high
    if isinstance(bounds, str):
        if bounds not in METRIC_RANGES:
            raise ValueError(f"bounds must be (low, high) or one of {sorted(METRIC_RANGES)}, got {bounds!r}")
        bounds = METRIC_RANGES[bounds]
    lo_b, hi_b = (float(b) for b in bounds)
    if not lo_b < hi_b:
        raise ValueError(f"bounds must be (low, high) with low < high, got {bounds!r}")
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    if bool(np.any(low < lo_b) or np.any(high > hi_b)):
        fig.__dict__.setdefault("_sandbox_clipped", set()).add((lo_b, hi_b))
    return np.clip(low, lo_b, hi_b), np.clip(high, lo_b, hi_b)


def band(ax, x, values, label: str, statistic: str = "mean", color_: str | None = None,
         bounds: tuple[float, float] | str | None = None, **kwargs) -> None:
    """Plot statistic over seeds (rows of ``values [n_seeds, n_points]``) with its 95% band (a
    t-interval for the mean), kept within ``bounds`` (``within_range``); the figure remembers it,
    and ``save_figure``'s footer says so."""
    if statistic not in BAND_KIND:
        raise ValueError(f"statistic must be one of {sorted(BAND_KIND)}, got {statistic!r}")
    est, lo, hi = mean_ci_over_seeds(values, statistic=statistic, n_resamples=500)
    lo, hi = within_range(ax.figure, lo, hi, bounds)
    c = color_ or color(label)
    ax.plot(x, est, label=label, color=c, **kwargs)
    ax.fill_between(x, lo, hi, color=c, alpha=0.2, linewidth=0)
    seen = ax.figure.__dict__.setdefault("_sandbox_bands", {})
    seen.setdefault(BAND_KIND[statistic], set()).add(int(np.asarray(values).shape[0]))


def curve(ax, x, values, label: str, statistic: str = "mean", color_: str | None = None, max_points: int = 2,
          bounds: tuple[float, float] | str | None = None, **kwargs) -> None:
    """``band`` for curves; with ``max_points`` x values or fewer (quick fidelity) points with 95%
    error bars instead: a line through one or two points shows a trend the data cannot."""
    x = np.asarray(x, dtype=float)
    if x.ndim != 1 or np.shape(values)[-1] != x.size:
        raise ValueError(f"values must be [n_seeds, {x.size}] for {x.size} x values, got shape {np.shape(values)}")
    if x.size > max_points:
        band(ax, x, values, label, statistic, color_, bounds, **kwargs)
        return
    est, lo, hi = mean_ci_over_seeds(values, statistic=statistic, n_resamples=500)
    lo, hi = within_range(ax.figure, lo, hi, bounds)
    ax.errorbar(x, est, yerr=[est - lo, hi - est], fmt="o", color=color_ or color(label), label=label, capsize=3,
                ms=4, **kwargs)


def bands_note(fig) -> str | None:
    """'bands: 95% t-intervals of the mean over 20 seeds' for the bands ``band`` drew on ``fig``."""
    seen = getattr(fig, "_sandbox_bands", {})
    parts = [f"{kind} over {min(n)}{f'–{max(n)}' if max(n) > min(n) else ''} seeds" for kind, n in seen.items()]
    note = f"bands: {'; '.join(parts)}" if parts else None
    return ", ".join(part for part in (note, clipped_note(fig)) if part) or None


def clipped_note(fig) -> str | None:
    """'intervals clipped to the metric's range [0, 1]' when ``within_range`` clipped one on ``fig``."""
    ranges = sorted(getattr(fig, "_sandbox_clipped", set()))
    if not ranges:
        return None
    return "intervals clipped to the metric's range " + ", ".join(f"[{lo:g}, {hi:g}]" for lo, hi in ranges)


def save_figure(fig, name: str, outdir: str | os.PathLike | None = None, note: str | None = None,
                bands: str | None = None) -> list[Path]:
    """Write ``name.png`` and ``name.pdf`` to ``outdir`` (default ``$SANDBOX_FIGURES`` or
    ``paper_figures``). The footer, small in the corner, is ``note`` (e.g. the fidelity) and what the
    bands are: ``bands`` (say it for hand-drawn intervals) or what ``band`` drew."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    out = Path(outdir or os.environ.get("SANDBOX_FIGURES") or DEFAULT_FIGURES)
    out.mkdir(parents=True, exist_ok=True)
    footer = ", ".join(part for part in (note, bands or bands_note(fig), clipped_note(fig) if bands else None) if part)
    if footer:
        # just below the figure (bbox_inches="tight" takes it in), clear of the axes' labels, wrapped
        # to the figure's width (~21 characters of 6-point text per inch)
        wrapped = textwrap.fill(footer, max(40, int(fig.get_figwidth() * 21)), break_on_hyphens=False)
        fig.text(0.995, -0.01, wrapped, ha="right", va="top", fontsize=6, color="0.4")
    if footer and os.environ.get("SANDBOX_CLAIMS"):  # sandbox reproduce records it (seeds, steps, data)
        Path(os.environ["SANDBOX_CLAIMS"]).with_suffix(".note.txt").write_text(footer + "\n")
    paths = [out / f"{name}.png", out / f"{name}.pdf"]
    for p in paths:
        fig.savefig(p, bbox_inches="tight")
    return paths


__all__ = ["METHOD_COLORS", "METRIC_RANGES", "band", "bands_note", "clipped_note", "color", "curve", "np", "plt",
           "save_figure", "use_style", "within_range"]
