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


if __name__ == "__main__":
    print(cases_table())
    print()
    print(out_of_scope_table())
