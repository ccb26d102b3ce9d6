"""The case file as the tables of docs/predictions.md ("The cases", "Out of scope"), rendered from
the file so that the page and the file cannot disagree (tests/test_cases_report.py)."""

from __future__ import annotations

from simulations.cases import CaseFile, load_cases, staleness_of


def _source(source: dict) -> str:
    where = source.get("repo", "")
    if where:
        where += f" `{source['path'].split(' ')[0]}`"
    return where or source["url"]


def _arm(spec: dict, mapping: dict) -> str:
    text = spec["loss"]
    schedule = staleness_of(spec.get("lag"), mapping["d_probe"])
    if schedule:
        text += f", D {schedule['kind']} {schedule['D']}"
    precision = spec.get("precision", "none")
    if mapping["precision"][precision] > 0:
        text += f", {precision} κ = {mapping['precision'][precision]:g}"
    return text


def cases_table(cf: CaseFile | None = None) -> str:
    """One row per case: id, source, the published outcome, the mapped arms, the statistic."""
    cf = cf or load_cases()
    lines = ["| case | source | published outcome | sandbox arms (loss, lag, mismatch) | decided by |",
             "|---|---|---|---|---|"]
    for c in cf.cases:
        arms = "; ".join(f"{name}: {_arm(spec, cf.mapping)}" for name, spec in c.arms.items())
        decision = c.decision["statistic"]
        if "signal" in c.decision:
            decision += f" ({c.decision['signal']})"
        outcome = c.outcome.replace("||", "‖").replace("|", "/")
        lines.append(f"| `{c.id}` | {_source(c.source)} | {outcome} | {arms} | {decision} |")
    return "\n".join(lines)


def out_of_scope_table(cf: CaseFile | None = None) -> str:
    """One row per mechanism declared out of scope, with its reason."""
    cf = cf or load_cases()
    lines = ["| mechanism | why the sandbox does not represent it |", "|---|---|"]
    for entry in cf.out_of_scope:
        lines.append(f"| {entry['mechanism']} | {entry['reason']} |")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("||", "‖").replace("|", "\\|")


def changes_table(cf: CaseFile | None = None) -> str:
    """One row per first-round case the second amendment changes: what changed, the figure read,
    and what the published curve is by the file's rule."""
    from simulations.cases.amendments import CHANGES

    cf = cf or load_cases()
    amendment = next(a for a in cf.amendments if a.get("round") == 2)
    lines = ["| case | change | the published curve, read | by the file's rule / why |", "|---|---|---|---|"]
    for change in CHANGES:
        for entry in amendment.get(change, []):
            read = entry.get("read") or entry.get("mechanism") or "—"
            why = entry.get("by_the_rule") or entry.get("reason") or entry.get("why") or ""
            if change == "discrimination":
                read = f"plain arm: {_arm(entry['plain'], cf.mapping)}"
            lines.append(f"| `{entry['case']}` | {change.replace('_', ' ')} | {_cell(read)} | {_cell(why)} |")
    return "\n".join(lines)


def round_two_table(cf: CaseFile | None = None) -> str:
    """The second round's cases (the amendment applied): id, the outcome it tests, arms, statistic."""
    from simulations.cases.amendments import second_round

    cf = cf or load_cases()
    first = {c.id for c in cf.cases}
    lines = ["| case | new | outcome tested | arms (loss, lag, precision) | decided by |", "|---|---|---|---|---|"]
    for c in second_round(cf).cases:
        arms = "; ".join(f"{name}: {_arm(spec, cf.mapping).split(', bf16')[0].split(', fp16')[0]}"
                         f"{', ' + spec['precision'] if spec.get('precision') else ''}" for name, spec in c.arms.items())
        keys = {k: v for k, v in c.decision.items() if k not in ("statistic", "worse", "better", "arm")}
        decision = c.decision["statistic"] + (f" ({', '.join(f'{k}: {v}' for k, v in keys.items())})" if keys else "")
        lines.append(f"| `{c.id}` | {'' if c.id in first else 'new'} | {_cell(c.outcome)} | {arms} | {decision} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(cases_table())
    print()
    print(out_of_scope_table())
    print()
    print(changes_table())
    print()
    print(round_two_table())
