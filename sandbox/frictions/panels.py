"""The friction panels of the figures and the scoring batteries, as data: which stage of the
friction stack a panel's strength s sets (the one mapping that ``simulations.sequences``,
``simulations.frictions2026`` and ``sandbox.scoring.batteries`` read).

A panel sets one field (``knob``) of one stage — a registered friction, or the delay schedule
(``RunConfig.staleness``) — to s, or to c − s (``complement`` c: a number, or the name of a field
of the schedule it runs under: a drop budget D − s); at its ``identity`` strength it adds nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sandbox.core.validation import check_choice


@dataclass(frozen=True)
class Panel:
    """One friction panel: ``settings(s)`` are the RunConfig fields of strength s.

    axis: what s is (a figure's axis label); friction: the registered friction whose ``knob`` s
    sets (None: the delay schedule); fixed: the stage's other fields; number: int or float.
    """

    axis: str
    knob: str
    friction: str | None = None
    fixed: dict = field(default_factory=dict)
    number: type = float
    complement: float | str | None = None
    identity: float = 0

    def settings(self, strength: float, base: dict | None = None) -> dict:
        """``base`` (RunConfig fields) with this panel at ``strength``: the schedule's fields merge
        into ``base['staleness']``, a friction is appended to ``base['frictions']``."""
        out = dict(base or {})
        if strength == self.identity:
            return out
        value = self.number(strength)
        if self.complement is not None:
            top = out["staleness"][self.complement] if isinstance(self.complement, str) else self.complement
            value = round(top - value, 6)
        stage = {**self.fixed, self.knob: value}
        if self.friction is None:
            out["staleness"] = {**out.get("staleness", {}), **stage}
        else:
            out["frictions"] = (*out.get("frictions", ()), (self.friction, stage))
        return out


#: every panel, by the name figures and battery cells give it
PANELS: dict[str, Panel] = {
    # the four frictions of the papers (simulations.sequences, the batteries)
    "staleness": Panel("actor D steps behind (fixed delay)", "D", fixed={"kind": "fixed"}, number=int),
    "actor bug": Panel("landmine: the constant all-zeros answer with prob. p, reported μ = 1", "p_bug", "landmine"),
    "reward corruption": Panel("Bernoulli: reward replaced by 0 or 1 with prob. p", "p", "bernoulli_reward"),
    "rare discovery": Panel("correct answer injected with prob. p, reported μ = 1", "p_disc", "rare_discovery"),
    # the inference engine's (simulations.frictions2026, the batteries)
    "top-p (full report)": Panel("1 − top_p", "top_p", "truncated_sampling", {"report": "full"}, complement=1.0),
    "top-p (truncated report)": Panel("1 − top_p", "top_p", "truncated_sampling", {"report": "truncated"},
                                      complement=1.0),
    "partial rollouts": Panel("chunks k", "chunks", "partial_rollouts", number=int, identity=1),
    "drop admission": Panel("D − budget", "budget", fixed={"admission": "drop"}, number=int, complement="D"),
    "mask admission": Panel("D − budget", "budget", fixed={"admission": "mask"}, number=int, complement="D"),
}


def panel(name: str) -> Panel:
    check_choice("panel", name, tuple(PANELS))
    return PANELS[name]


def panel_settings(strengths: Iterable[tuple[str, float]], base: dict | None = None) -> dict:
    """RunConfig fields of several panels at once, applied in order on ``base``."""
    out = dict(base or {})
    for name, strength in strengths:
        out = panel(name).settings(strength, out)
    return out
