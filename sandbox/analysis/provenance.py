"""Which checkout made a figure or a scorecard."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


#: what ends a commit stamp made from a tree with uncommitted changes
DIRTY = "-dirty"
#: committed outputs of ``sandbox reproduce``, left out of the dirty check (git pathspecs)
OUTPUTS = (":(exclude)paper_figures",)


def git_commit() -> str:
    """The repository's short commit, ``-dirty`` when its tracked files differ (the committed figure
    outputs aside: a paper run rewrites them as it goes); 'unknown' outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *OUTPUTS], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (DIRTY if dirty else "")


def is_dirty(stamp: str) -> bool:
    """Whether a commit stamp (``git_commit``'s) was made from a tree with uncommitted changes."""
    return stamp.endswith(DIRTY)


def names_dirty_commit(text: str) -> bool:
    """Whether markdown text (a CLAIMS.md figure row) names a dirty stamp, as it writes one: `abc1234-dirty`."""
    return f"{DIRTY}`" in text
