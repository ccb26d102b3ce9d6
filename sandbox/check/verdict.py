"""The verdict of a check and its three files: ``check.md`` (verdict, mapping table, the two
batteries' tables), ``check.png`` (the deployment battery's scorecard figure) and ``check.json``
(everything). Statistics, tables and figures are the scorecard's (``sandbox.scoring.report``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from sandbox.check.alarms import alarm_markdown
from sandbox.check.mapping import Mapping
from sandbox.scoring.report import figure, markdown, write

CONTROL = "reversal/deploy-control"


def control_of(cell: str) -> str:
    """The control of a cell's own environment: ``mnist/deploy-async-D17`` → ``mnist/deploy-control``."""
    return f"{cell.split('/')[0]}/deploy-control"


def _cells(summary: dict, method: str) -> dict[str, dict]:
    return {r["cell"]: r for r in summary["cells"] if r["method"] == method}


def _iv(d: dict) -> str:
    return f"{d['estimate']:.2f} [{d['low']:.2f}, {d['high']:.2f}]"


def _best(summary: dict) -> str:
    """The built-in with the highest IQM."""
    return max(summary["methods"][1:], key=lambda m: summary["aggregate"][m]["iqm"]["estimate"])


def verdict(mapping: Mapping, deploy: dict, standard: dict, options: dict[str, dict] | None = None) -> list[str]:
    """Short lines: what the config is, where it loses signal, fails or diverges on its own
    frictions, which friction hurts it most, and — with ``options`` (``{rival name: config change}``,
    the losses its framework can select, ``sandbox.check.alternatives``) — the best of those on the
    same cells as the change to make; else what the best built-in does there."""
    new, recipe, dep = deploy["new"], mapping.recipe, mapping.deployment
    kwargs = ", ".join(f"{k}={v}" for k, v in recipe.estimator_kwargs.items()
                       if k not in ("verl_metrics", "trl_metrics"))  # what the run logs: no loss field
    lines = [f"**Mapped**: `{recipe.estimator}` ({kwargs}) with the `{recipe.advantage}` advantage, π_old "
             f"{'recomputed by the trainer' if dep.proximal == 'recompute' else 'the engine log-probs μ'}; "
             f"deployment: {', '.join(dep.frictions()) or 'no friction'}, group {dep.group}."]
    agg = deploy["aggregate"]
    head = f"**Deployment battery** ({len(deploy['seeds'])} cells): IQM {_iv(agg[new]['iqm'])}"
    if options is not None:
        lines.append(head + ".")
        lines.append(_options_line(mapping, deploy, options))
    elif len(deploy["methods"]) > 1:
        best = _best(deploy)
        which = "best built-in" if len(deploy["methods"]) > 2 else f"best built-in on `{standard['battery']}`"
        lines.append(f"{head}; the {which}, `{best}` ({_sandbox_method(mapping)}), {_iv(agg[best]['iqm'])}; "
                     f"P({new} > {best}) = {_iv(deploy['probability_of_improvement'][new][best])}.")
    else:
        lines.append(f"{head}; nothing else ran on these cells (`--deployment-against cached` computes only the "
                     f"configuration's jobs; the default, `framework`, adds the losses {mapping.source} can select).")
    own = _cells(deploy, new)
    controls = {c: own.get(control_of(c), own.get(CONTROL)) for c in own}  # each cell's own environment's
    frictions = {c: r for c, r in own.items() if r["friction"] != "deployment" and controls[c] is not None}
    if frictions:
        worst = max(frictions, key=lambda c: controls[c]["mean"] - frictions[c]["mean"])
        w, control = frictions[worst], controls[worst]
        rival = max(deploy["methods"][1:], key=lambda m: _cells(deploy, m)[worst]["mean"], default=None)
        which = f"of {mapping.version}'s options" if options is not None else "built-in"
        there = "" if rival is None else \
            f"; the best {which} there, `{rival}`, scores {_cells(deploy, rival)[worst]['mean']:.2f}"
        lines.append(f"**Hurts most**: `{worst}` — {w['mean']:.2f} [{w['low']:.2f}, {w['high']:.2f}] against "
                     f"{control['mean']:.2f} on its control ({w['mean'] - control['mean']:+.2f}){there}."
                     if w["mean"] < control["mean"] else
                     "**No friction lowers its mean score** below its environment's control.")
        lost = [c for c, r in own.items() if not c.endswith("/deploy-control") and controls[c] is not None
                and r["high"] < controls[c]["mean"]]
        lines.append(f"**Loses signal** (95% interval below its environment's control mean) on: "
                     f"{', '.join(f'`{c}`' for c in lost)}." if lost else
                     "**Keeps its signal**: every cell's 95% interval reaches its environment's control mean.")
    failed = [(c, r["mean"]) for s in (deploy, standard) for c, r in _cells(s, new).items() if r["low"] <= 0.0]
    lines.append(f"**Fails** (95% interval reaches the random level, score 0) on: "
                 f"{', '.join(f'`{c}` ({m:.2f})' for c, m in failed)}." if failed else
                 "**Fails on no cell**: every cell's 95% interval lies above the random level.")
    diverged = {c: r["diverged"] for s in (deploy, standard) for c, r in _cells(s, new).items() if r["diverged"]}
    runs = agg[new]["runs"] + standard["aggregate"][new]["runs"]
    lines.append(f"**Diverges** on: {', '.join(f'`{c}` ({n})' for c, n in diverged.items())}." if diverged
                 else f"**No run diverged** (0/{runs}).")
    ranked = sorted(standard["methods"], key=lambda m: -standard["aggregate"][m]["iqm"]["estimate"])
    top = ranked[0] if ranked[0] != new else ranked[1]
    lines.append(f"**Battery `{standard['battery']}`** ({len(standard['seeds'])} cells): IQM "
                 f"{_iv(standard['aggregate'][new]['iqm'])}, rank {ranked.index(new) + 1} of {len(ranked)}; "
                 f"the best {'other ' if ranked[0] == new else ''}method, `{top}`, "
                 f"{_iv(standard['aggregate'][top]['iqm'])} ({_sandbox_method(mapping)}).")
    return lines


def _sandbox_method(mapping: Mapping) -> str:
    """What a built-in is to the config's user: not a setting of their framework."""
    return f"a sandbox method: no {mapping.source} setting selects it"


def _options_line(mapping: Mapping, deploy: dict, options: dict[str, dict]) -> str:
    """The losses the config's framework can select, on the same cells: the best of them against
    the config, and the change that selects it."""
    from sandbox.check.alternatives import change_text

    new, agg = deploy["new"], deploy["aggregate"]
    head = f"**{mapping.version}'s options on these cells**"
    if not options:
        return (f"{head}: none to compare — every loss it can select here maps to this configuration's or is "
                "refused with the rest of it.")
    best = max(options, key=lambda m: agg[m]["iqm"]["estimate"])
    p = deploy["probability_of_improvement"][new][best]
    if agg[best]["iqm"]["estimate"] <= agg[new]["iqm"]["estimate"]:
        return (f"{head} ({len(options)}): none beats the configuration; the best, `{best}`, "
                f"{_iv(agg[best]['iqm'])}; P({new} > it) = {_iv(p)}.")
    resolved = "" if p["high"] < 0.5 else " — not told apart from the configuration (the interval of P reaches ½)"
    return (f"{head} ({len(options)}): the best, `{best}`, {_iv(agg[best]['iqm'])}; P({new} > it) = {_iv(p)}"
            f"{resolved}. To try it: `{change_text(options[best])}`.")


def _section(text: str) -> str:
    """A scorecard's markdown one heading level down, with a blank line after it."""
    return "\n".join("#" + line if line.startswith("#") else line for line in text.splitlines()) + "\n"


def report_markdown(mapping: Mapping, lines: list[str], deploy: dict, standard: dict, code: str,
                    battery_dir: str) -> str:
    dep = mapping.deployment
    parts = [f"# Check: `{mapping.label}` ({mapping.source})", "", *[f"- {line}" for line in lines], "",
             *[f"> Warning: {w}\n" for w in mapping.warnings],
             f"## Mapping (read as {mapping.version})", "", mapping.markdown(), ""]
    if mapping.ignored:
        parts += [f"Ignored on request (`--ignore`): {', '.join(f'`{k}`' for k in mapping.ignored)}.", ""]
    if mapping.infrastructure:
        parts += [f"{len(mapping.infrastructure)} infrastructure key(s) skipped (not loss or friction settings): "
                  + ", ".join(f"`{k}`" for k in mapping.infrastructure) + ".", ""]
    parts += [f"Deployment: group {dep.group}, reuse {dep.reuse}, delay {dep.delay or 'none'}, top-p {dep.top_p}, "
              f"top-k {dep.top_k} ({dep.report} log-probs), partial {dep.partial}, precision {dep.precision or 'off'}, "
              f"π_old {dep.proximal}. Figure: `check.png`; the `{standard['battery']}` scorecard: "
              f"`{battery_dir}/scorecard.png`.", "",
              _section(markdown(deploy, code)), _section(markdown(standard, code))]
    return "\n".join(parts) + "\n"


def write_check(out: str | Path, mapping: Mapping, lines: list[str], deploy_frame, standard_frame,
                code: str, wall_s: float) -> list[Path]:
    """``check.md|png|json`` in ``out``, and the chosen battery's scorecard in ``out/BATTERY/``."""
    import matplotlib.pyplot as plt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    deploy, standard = deploy_frame.attrs["scorecard"], standard_frame.attrs["scorecard"]
    battery_dir = standard["battery"]
    write(standard, standard_frame, out / battery_dir, code)
    paths = [out / "check.md", out / "check.png", out / "check.json"]
    paths[0].write_text(report_markdown(mapping, lines, deploy, standard, code, battery_dir) + "\n"
                        + alarm_markdown([deploy_frame, standard_frame], deploy["new"], mapping.logs,
                                         mapping.deployment.reuse, mapping.source))
    fig = figure(deploy)
    fig.savefig(paths[1])
    plt.close(fig)
    columns = [c for c in ("method", "cell", "env", "friction", "seed", "value", "score", "diverged")
               if c in deploy_frame.columns]
    scores = deploy_frame[columns].astype(object).where(deploy_frame[columns].notna(), None)
    data = {"mapping": mapping.to_dict(), "verdict": lines, "deployment": {**deploy, "scores": scores.to_dict("records")},
            "standard": standard, "code": code, "wall_s": wall_s,
            "jobs": {"deployment": deploy_frame.attrs["jobs"], "standard": standard_frame.attrs["jobs"]}}
    paths[2].write_text(json.dumps(_strict(data), indent=1, default=float, allow_nan=False))
    return paths


def _strict(value):
    """Strict JSON: a non-finite float (CISPO's ε_l = ∞, a cap of ∞) becomes its name, 'inf'."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value
