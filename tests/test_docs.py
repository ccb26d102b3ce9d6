"""The examples of docs/*.md and the README run as written and print what the pages show.

Each page's python blocks run in order in one fresh process (so a block may use what an earlier
one defined), a separator printed between them; a block followed by a ``text`` block must print
that (tests/doc_examples.py: exact, ``…`` a wildcard). A bash block followed by a ``text`` block is
run too: its ``$ ``-style commands, or else the block's own single command, each ``sandbox ...``
as ``python -m sandbox.cli ...``; the output is stdout when the command succeeds, stderr when it
fails. Each page runs in a fresh folder, so its results/ starts empty. ``<!-- test: skip: why -->`` keeps a block out (long computations only, and says why);
``PLUGIN_BLOCKS`` are the README's plugin files (tests/test_readme.py), ``needs-mnist`` runs only
where the MNIST test split is found.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from .doc_examples import DOCS, PLUGIN_BLOCKS, README, ROOT, Block, blocks, commands, matches

PAGES = [README, *DOCS]
SEPARATOR = "----- next documentation block -----"
TIMEOUT = 240


def _ids(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _excluded() -> set[str]:
    from sandbox.envs.mnist import find_test_split

    return PLUGIN_BLOCKS | (set() if find_test_split() is not None else {"needs-mnist"})


def _runs(block: Block, lang: str) -> bool:
    return block.lang == lang and not block.skipped and block.marker not in _excluded()


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("SANDBOX_RESULTS", None)  # results/ in the working folder, a fresh tmp_path, as the pages show
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _show(expected: str, actual: str) -> str:
    return f"\n--- the page shows ---\n{expected}\n--- it printed ---\n{actual}"


PYTHON_PAGES = [page for page in PAGES if any(b.lang == "python" for b in blocks(page))]


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=_ids)
def test_python_examples_print_what_the_page_shows(page, tmp_path):
    run = [b for b in blocks(page) if _runs(b, "python")]
    if not run:
        pytest.skip(f"every python example of {_ids(page)} is marked out here")
    script = "\n".join(f"print({SEPARATOR!r}, flush=True)\n{b.code}" for b in run)
    (tmp_path / "page.py").write_text(script)
    result = subprocess.run([sys.executable, "page.py"], cwd=tmp_path, env=_env(tmp_path),
                            capture_output=True, text=True, timeout=TIMEOUT)
    outputs = result.stdout.split(SEPARATOR + "\n")[1:]
    assert result.returncode == 0, (f"{_ids(page)}: the example at line {run[len(outputs) - 1].line} failed:\n"
                                    f"{result.stderr[-3000:]}")
    assert len(outputs) == len(run)
    for block, actual in zip(run, outputs):
        if block.output is not None:
            assert matches(block.output, actual), f"{_ids(page)}, line {block.line}:" + _show(block.output, actual)


def _one_command(code: str) -> str:
    lines = [re.sub(r"\s+#.*$", "", line) for line in code.replace("\\\n", " ").splitlines()]
    lines = [line for line in lines if line.strip()]
    assert len(lines) == 1, f"a bash example with an output shows one command, not {lines}"
    return lines[0]


def _shown_commands(block: Block) -> list[tuple[str, str]]:
    if any(line.startswith("$ ") for line in block.output.splitlines()):
        return commands(block.output)
    return [(_one_command(block.code), block.output)]


BASH = [(page, b) for page in PAGES for b in blocks(page) if b.lang == "bash" and b.output is not None]


@pytest.mark.parametrize("page, block", BASH, ids=[f"{_ids(p)}:{b.line}" for p, b in BASH])
def test_bash_examples_print_what_the_page_shows(page, block, tmp_path):
    if not _runs(block, "bash"):
        pytest.skip(block.marker)
    for command, expected in _shown_commands(block):
        argv = shlex.split(command)
        assert argv[0] == "sandbox", f"{_ids(page)}, line {block.line}: only sandbox commands are run: {command}"
        result = subprocess.run([sys.executable, "-m", "sandbox.cli", *argv[1:]], cwd=tmp_path, env=_env(tmp_path),
                                capture_output=True, text=True, timeout=TIMEOUT)
        actual = result.stdout if result.returncode == 0 else result.stderr
        assert matches(expected, actual), f"{_ids(page)}, line {block.line}: $ {command}" + _show(expected, actual)


def test_docs_link_only_inside_the_repository():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            assert "://" not in target, f"{_ids(page)} links outside the repository: {target}"
            path = (page.parent / target.split("#")[0]).resolve()  # a bare #anchor is the page itself
            assert path.is_relative_to(ROOT) and path.exists(), f"{_ids(page)}: broken link {target}"


def test_every_docs_page_is_linked_from_the_readme():
    readme = README.read_text()
    for page in DOCS:
        if page.name == "README.md":
            continue  # the index of docs/ is linked as docs/
        assert f"](docs/{page.name})" in readme, f"README does not link docs/{page.name}"
