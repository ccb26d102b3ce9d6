"""Figure families are found through the ``sandbox.figures`` entry points (pyproject.toml): every
module of simulations/ that registers a figure is declared there, and an installed distribution
adds its own family by declaring its module in that group."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap

import pytest

import simulations
from sandbox.core.plugins import entry_points_of
from sandbox.reproduce import figures

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_module_that_registers_a_figure_is_an_entry_point():
    providers = {f"simulations.{f.stem}" for f in (ROOT / "simulations").glob("*.py")
                 if f.stem != "__init__" and "register_figure(" in f.read_text()}
    declared = {entry.value for entry in entry_points_of("sandbox.figures").values()}
    assert providers and providers <= declared, f"add {sorted(providers - declared)} to [project.entry-points.'sandbox.figures']"


def test_the_families_load_in_the_order_of_their_entry_points():
    """Figures keep the order `sandbox list` and CLAIMS.md show: the theory figures first, the
    early-warning figure last (entry points load in the order of their names; in a fresh process,
    as a command's: a module imported earlier registers its figures earlier)."""
    code = "from sandbox.reproduce import figures; print(' '.join(f.name for f in figures().select()))"
    names = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert names[0] == "gate" and names[-1] == "early-warning"
    assert names.index("mnist-learning") < names.index("reversal-learning") < names.index("kondo")


@pytest.fixture
def installed_family(tmp_path, monkeypatch):
    """A third-party distribution on sys.path whose ``sandbox.figures`` entry point names its own
    module, which registers one figure."""
    simulations.load_families()  # the package's own figures, registered for good before the copy below
    (tmp_path / "thirdparty_figs.py").write_text(textwrap.dedent("""
        from simulations import Figure, register_figure
        from sandbox.jobs.sweep import Job

        register_figure(Figure("thirdparty-demo", "thirdparty", "A family from another package",
                               lambda fidelity: [Job("math:fsum", {"seq": [1, 2]})], "notebooks/none.py"))
    """))
    info = tmp_path / "thirdparty_figs-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdparty-figs\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[sandbox.figures]\nthirdparty = thirdparty_figs\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(simulations, "FIGURES", dict(simulations.FIGURES))  # the registration stays in this test
    yield tmp_path
    for module in ("thirdparty_figs", "thirdparty_broken"):
        sys.modules.pop(module, None)


def test_another_package_adds_a_figure_family_by_an_entry_point(installed_family):
    assert "thirdparty" in entry_points_of("sandbox.figures")
    (figure,) = figures().select(["thirdparty-demo"])
    assert figure.group == "thirdparty" and [j.params for j in figure.jobs("quick")] == [{"seq": [1, 2]}]
    assert "gate" in simulations.FIGURES  # the package's own families load beside it


def test_without_the_entry_point_the_family_is_unknown():
    with pytest.raises(ValueError, match="unknown figure or group 'thirdparty-demo'"):
        figures().select(["thirdparty-demo"])


def test_a_missing_family_module_is_skipped_but_its_own_errors_propagate(installed_family):
    (installed_family / "thirdparty_figs-0.1.dist-info" / "entry_points.txt").write_text(
        "[sandbox.figures]\ngone = thirdparty_gone\nbroken = thirdparty_broken\n")
    (installed_family / "thirdparty_broken.py").write_text("import no_such_dependency_xyz\n")
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency_xyz"):
        simulations.load_families()
    (installed_family / "thirdparty_broken.py").write_text("X = 1\n")
    sys.modules.pop("thirdparty_broken", None)
    assert "gate" in simulations.load_families()
