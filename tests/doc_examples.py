"""The examples of the README and docs/*.md, read as a user reads them, so tests can run them and
check what they print.

A fenced ``python`` or ``bash`` block may be followed (blank lines between, nothing else) by a
``text`` block: the output the docs promise. A ``text`` block whose lines start with ``$ `` holds
commands and their outputs. Matching is exact, line by line with trailing blanks ignored, except
that ``…`` matches anything: the rest of a line, or, on a line of its own, any number of lines,
and that a float printed with five or more decimals may differ by one in its last digit (another
CPU rounds otherwise: docs/reliability.md, "Numbers that travel").
A ``<!-- test: MARKER -->`` comment right above a block names it (``skip: why`` keeps it out of
the runs, and says why in the docs' source).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: README blocks that are plugin files, each run on its own by tests/test_readme.py (not with the page)
PLUGIN_BLOCKS = {"extension", "add-environment", "add-friction"}
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))

_FENCE = re.compile(r"(?:<!-- test: (?P<marker>[^>]*?) -->\n)?```(?P<lang>\w*)\n(?P<code>.*?)```\n?"
                    r"(?:\n*```text\n(?P<output>.*?)```)?", re.S)


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    marker: str  # '' when unmarked
    output: str | None  # the promised output, if the docs show one
    line: int  # where the block starts in its file (1-based), for messages

    @property
    def skipped(self) -> bool:
        return self.marker.startswith("skip")


def blocks(path: Path) -> list[Block]:
    """Every fenced block of ``path`` in order; a ``text`` block right after a code block is that
    block's ``output``, not a block of its own (a ``text`` block after prose is one, checked only
    where a test names its marker)."""
    text = path.read_text()
    out = []
    for m in _FENCE.finditer(text):
        out.append(Block(m.group("lang"), m.group("code"), (m.group("marker") or "").strip(), m.group("output"),
                         text[: m.start()].count("\n") + 1))
    return out


#: a printed float with five or more decimals: its last digit may move by one on another CPU
#: (docs/reliability.md, "Numbers that travel": another capability sums in another order)
_LONG = re.compile(r"-?\d+\.\d{5,}")


def _literal(text: str) -> str:
    """``text`` as a pattern, each long float in it also matching its last digit ± 1."""
    out, at = "", 0
    for number in _LONG.finditer(text):
        value, step = Decimal(number.group()), Decimal(1).scaleb(-len(number.group().split(".")[1]))
        options = sorted({str(value + d * step) for d in (-1, 0, 1)} | {number.group()})
        out += re.escape(text[at:number.start()]) + "(?:" + "|".join(map(re.escape, options)) + ")"
        at = number.end()
    return out + re.escape(text[at:])


def matches(expected: str, actual: str) -> bool:
    """``actual`` is what ``expected`` promises (module docstring: ``…`` is a wildcard; a float
    printed with five or more decimals may differ by one in its last digit)."""
    def norm(s: str) -> str:
        return "\n".join(line.rstrip() for line in s.strip("\n").splitlines())

    pattern = ""
    for line in norm(expected).split("\n"):
        if line.strip() == "…":
            pattern += r"(?:[^\n]*\n)*?"
            continue
        pattern += r"[^\n]*".join(_literal(part) for part in line.split("…")) + r"\n"
    return re.fullmatch(pattern, norm(actual) + "\n", re.S) is not None


def commands(output: str) -> list[tuple[str, str]]:
    """A ``$ ``-style output block as (command, its expected output) pairs."""
    pairs, current, lines = [], None, []
    for line in output.splitlines():
        if line.startswith("$ "):
            if current is not None:
                pairs.append((current, "\n".join(lines)))
            current, lines = line[2:], []
        else:
            lines.append(line)
    if current is not None:
        pairs.append((current, "\n".join(lines)))
    return pairs


def setup_commands() -> list[str]:
    """The two set-up commands at the top of the README (its first two bash blocks)."""
    return [b.code.strip() for b in blocks(README) if b.lang == "bash"][:2]


def code(lang: str, path: Path = README) -> list[tuple[str, str]]:
    """(marker, code) of every ``lang`` block of ``path``."""
    return [(b.marker, b.code) for b in blocks(path) if b.lang == lang]


__all__ = ["DOCS", "README", "ROOT", "Block", "blocks", "code", "commands", "matches", "setup_commands"]
