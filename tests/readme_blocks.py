"""Read the README's (or another markdown document's) set-up commands and code blocks, so tests can
run exactly what users read."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def blocks(lang: str, path: Path = README) -> list[tuple[str, str]]:
    """(marker, code) for every fenced block of ``lang`` in ``path`` (the README by default); marker
    is the ``<!-- test: X -->`` comment right above the block, or ''."""
    text = path.read_text()
    pattern = re.compile(r"(?:<!-- test: (?P<marker>[\w-]+) -->\n)?```" + lang + r"\n(?P<code>.*?)```", re.S)
    return [(m.group("marker") or "", m.group("code")) for m in pattern.finditer(text)]


def setup_commands() -> list[str]:
    """The two set-up commands at the top of the README (the first two bash blocks)."""
    return [code.strip() for _, code in blocks("bash")[:2]]
