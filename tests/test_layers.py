"""The house rules of DESIGN.md, checked: imports run one way (core ← estimators, advantages,
controllers, frictions, policies, envs, objectives, kernels ← tasks ← runtime ← jobs ← analysis ← scoring,
check, reproduce ← cli), no import cycle between modules nor between folders, the library never
imports ``simulations`` (figures, batteries and tasks come through entry points:
``sandbox.core.plugins.entry_point_objects``), no library file over 400 lines."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "sandbox"
#: the target layering: a module may import from its own layer or any lower one (folders of one
#: layer may import each other, but never in a cycle: test_no_import_cycle_between_folders)
LAYER = {"core": 0,
         "estimators": 1, "advantages": 1, "controllers": 1, "frictions": 1, "policies": 1, "envs": 1, "kernels": 1, "objectives": 1,
         "diagnostics": 1, "oracles": 1,
         "tasks": 2, "methods": 2,
         "runtime": 3,  # the actor-learner: actor, learner, loop, history, optim, config, ray_async
         "jobs": 4,  # sweeps, worker pool, backends, costs, the results store
         "analysis": 5,  # statistics, claims, plots, figure data: read what jobs stored
         "scoring": 6, "check": 6, "reproduce": 6, "notebooks": 6, "reproduce_costs": 6, "claims_file": 6,
         "cli": 7, "cli_args": 7, "cli_run": 7, "cli_score": 7, "cli_check": 7, "__init__": 7}
FILES = sorted(ROOT.rglob("*.py"))


def _runtime_nodes(tree: ast.AST):
    """Every node except those under ``if TYPE_CHECKING:`` (annotations only, never executed)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            continue
        yield node
        yield from _runtime_nodes(node)


def _imports(path: pathlib.Path) -> list[str]:
    out = []
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
        elif isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
    return out


def _layer(path: pathlib.Path) -> str:
    return path.relative_to(ROOT).with_suffix("").parts[0]


def test_every_top_level_module_has_a_layer():
    assert {_layer(f) for f in FILES} <= set(LAYER)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_run_one_way_and_never_reach_simulations(path):
    me = _layer(path)
    for module in _imports(path):
        assert not module.startswith("simulations"), f"{path.name} imports {module}: register figures through the sandbox.figures entry point"
        if module.startswith("sandbox."):
            other = module.split(".")[1]
            assert LAYER[other] <= LAYER[me], f"{path.relative_to(ROOT)} ({me}) imports {module} ({other}): upward"


#: the seams between families (issue 47): what each side may not import, though the layers allow it
#: (what both sides share — observations, token conventions, ``Versions`` — lives in ``core``)
APART = [("policies", "envs", "no policy imports an environment"),
         ("frictions", "policies", "no friction imports a policy"),
         ("tasks", "estimators", "no task imports an estimator (a diagnostics hook takes estimator names)")]


def _crossing(modules: list[str], forbidden: str) -> list[str]:
    """The modules of ``modules`` on the ``forbidden`` side of a seam."""
    return [m for m in modules if m == f"sandbox.{forbidden}" or m.startswith(f"sandbox.{forbidden}.")]


@pytest.mark.parametrize("folder, forbidden, rule", APART, ids=[r for _, _, r in APART])
def test_the_seams_between_families_hold(folder, forbidden, rule):
    files = [path for path in FILES if _layer(path) == folder]
    assert files, folder
    offending = {str(path.relative_to(ROOT)): _crossing(_imports(path), forbidden) for path in files}
    assert not {k: v for k, v in offending.items() if v}, rule


def test_the_seam_rule_sees_a_crossing():
    """What the rule above would refuse (a check that cannot fail checks nothing)."""
    modules = ["sandbox.core.tokens", "sandbox.envs.text", "sandbox.envs", "sandbox.envsx"]
    assert _crossing(modules, "envs") == ["sandbox.envs.text", "sandbox.envs"]


def test_no_two_modules_import_each_other():
    """No two-file loop (``runtime/build.py`` ↔ ``runtime/config.py`` was one), lazy imports included."""
    names = {f: "sandbox." + ".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") for f in FILES}
    graph = {names[f]: {m for m in _imports(f) if m.startswith("sandbox.")} for f in FILES}
    loops = sorted({tuple(sorted((a, b))) for a, deps in graph.items() for b in deps
                    if b != a and b in graph and a in graph[b] and not a.startswith(b + ".") and not b.startswith(a + ".")})
    assert not loops, f"modules that import each other: {loops}"


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (node → nodes it imports) as a path, or None."""
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return (stack + [node])[(stack + [node]).index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt, stack + [node])):
                return found
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node, [])):
            return found
    return None


def test_no_import_cycle_between_modules():
    names = {f: "sandbox." + ".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") for f in FILES}
    graph = {names[f]: {m for m in _imports(f) if m.startswith("sandbox.")} for f in FILES}
    graph = {k: {m for m in v if m in graph and m != k and not k.startswith(m + ".")} for k, v in graph.items()}
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " → ".join(cycle)


def test_no_import_cycle_between_folders():
    """Folders (``runtime``, ``jobs``, ``analysis`` …) import each other one way, even within a layer."""
    graph: dict[str, set[str]] = {_layer(f): set() for f in FILES}
    for path in FILES:
        graph[_layer(path)] |= {m.split(".")[1] for m in _imports(path) if m.startswith("sandbox.")} - {_layer(path)}
    cycle = _cycle(graph)
    assert cycle is None, "folder import cycle: " + " → ".join(cycle)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_library_file_over_400_lines(path):
    assert len(path.read_text().splitlines()) <= 400


@pytest.mark.parametrize("group, folder, marker", [("sandbox.tasks", "tasks", "@register_task("),
                                                   ("sandbox.batteries", "scoring/batteries", "BATTERY =")])
def test_entry_points_name_every_module_that_provides(group, folder, marker):
    """Every module that registers a task or defines a battery is an entry point of its group
    (pyproject.toml; a stale install says so: ``pip install -e .``)."""
    from sandbox.core.plugins import entry_points_of

    providers = {"sandbox." + ".".join(f.relative_to(ROOT).with_suffix("").parts)
                 for f in (ROOT / folder).glob("*.py") if marker in f.read_text()}
    declared = {entry.module for entry in entry_points_of(group).values()}
    assert providers <= declared, f"add {sorted(providers - declared)} to [project.entry-points.{group!r}]"


# ----------------------------------------------------------------------------- the protocols
def _registered_tasks():
    from sandbox.tasks import TASKS, load_tasks

    load_tasks()
    return [(name, TASKS.get(name)) for name in TASKS.names()]


def test_every_registered_task_is_the_one_generic_task():
    """No task subclass per family holds actor or learner logic: a registered task is the generic
    ``Task`` (its knobs and how it builds the environment, the policy and the objective) and
    overrides none of the calls ``Task`` writes once."""
    from sandbox.tasks.base import TASK_CALLS, Task

    for name, cls in _registered_tasks():
        assert issubclass(cls, Task), name
        overridden = [call for call in TASK_CALLS if getattr(cls, call) is not getattr(Task, call)]
        assert not overridden, f"task {name!r} ({cls.__qualname__}) overrides {overridden}: put it in its environment or policy"


def test_no_module_of_the_tasks_folder_but_base_writes_an_actor_or_learner_call():
    """The family modules (bandits, MNIST, sequences, text) define knobs, builders and diagnostics
    hooks; the calls themselves are written once, in tasks/base.py."""
    from sandbox.tasks.base import TASK_CALLS

    for path in sorted((ROOT / "tasks").glob("*.py")):
        if path.name == "base.py":
            continue
        defined = {node.name for cls in ast.walk(ast.parse(path.read_text())) if isinstance(cls, ast.ClassDef)
                   for node in cls.body if isinstance(node, ast.FunctionDef)}
        assert not defined & set(TASK_CALLS), f"{path.name} defines {sorted(defined & set(TASK_CALLS))}"


@pytest.mark.parametrize("name", ["bandit", "gaussian_bandit", "mnist", "reverse_copy", "sequences", "bit_parity",
                                  "key_value", "subsequence_match", "hf_text", "text_reverse", "text_parity",
                                  "text_arithmetic", "addition", "regime"])
def test_every_registered_task_composes_an_environment_and_a_policy(name):
    """Built with its defaults (no data read, no model built yet), a task is ``Environment`` ×
    ``Policy`` × ``Objective``; the list above is every registered task (checked below)."""
    from sandbox.envs.base import Environment
    from sandbox.objectives import Objective
    from sandbox.policies.base import Policy
    from sandbox.tasks import make_task

    task = make_task(name, **({"download": False} if name == "mnist" else {}))
    assert isinstance(task.environment, Environment) and isinstance(task.policy, Policy)
    assert isinstance(task.objective, Objective)


def test_the_composition_test_names_every_registered_task():
    names = {name for name, _ in _registered_tasks()}
    listed = set(test_every_registered_task_composes_an_environment_and_a_policy.pytestmark[0].args[1])
    assert names == listed, f"add {sorted(names - listed)} to the parametrisation above"


def test_every_registered_policy_implements_the_protocol():
    """Every registered policy family (tabular, MLP, transformer, causal LM, plugins) is a concrete
    ``Policy``: init, sample (the one decode loop) and score (the one scorer) all written."""
    import inspect

    from sandbox.policies.base import POLICIES, Policy

    _registered_tasks()  # the task modules import every built-in policy family
    assert {"tabular", "mlp", "transformer", "causal_lm"} <= set(POLICIES.names())
    for name in POLICIES.names():
        cls = POLICIES.get(name)
        assert issubclass(cls, Policy) and not inspect.isabstract(cls), name


def test_one_scorer_for_the_learner():
    """The learner scores a rollout only through ``Task.score``, which calls the policy's scorer:
    no per-family path beside it (the runtime never asks a policy or a model directly)."""
    import inspect

    from sandbox.tasks.base import Task

    learner = (ROOT / "runtime" / "learner.py").read_text()
    assert "task.score(" in learner and ".policy." not in learner and ".model." not in learner
    assert "self.policy.scored(" in inspect.getsource(Task.score)


# ----------------------------------------------------------------------------- the drawing
def structure() -> str:
    """The folders (rooms) on floors: a room's floor is one above the highest room it imports
    (lazy imports included), each line ``room ← the rooms it imports``; docs/design.md shows it."""
    graph: dict[str, set[str]] = {_layer(f): set() for f in FILES}
    for path in FILES:
        graph[_layer(path)] |= {m.split(".")[1] for m in _imports(path) if m.startswith("sandbox.")} - {_layer(path)}
    floors: dict[str, int] = {}

    def floor(room: str) -> int:
        if room not in floors:
            floors[room] = 1 + max((floor(r) for r in graph[room]), default=-1)
        return floors[room]

    lines = [f"{len(graph)} rooms, {len({floor(r) for r in graph})} floors, "
             f"{sum(len(v) for v in graph.values())} arrows (python -m pytest tests/test_layers.py -k drawing)"]
    for level in sorted({floor(r) for r in graph}, reverse=True):
        for room in sorted(r for r in graph if floor(r) == level):
            lines.append((f"{level:>2}  {room:<16}" + (f"← {' '.join(sorted(graph[room]))}" if graph[room] else "")).rstrip())
    return "\n".join(lines)


def test_the_drawing_in_docs_design_is_the_code():
    """docs/design.md's structure block is ``structure()`` of the code as it is (regenerate: print it)."""
    text = (ROOT.parent / "docs" / "design.md").read_text()
    start, end = "<!-- structure: begin -->\n```text\n", "```\n<!-- structure: end -->"
    assert start in text and end in text, "docs/design.md holds the structure block"
    drawn = text[text.index(start) + len(start): text.index(end)]
    assert drawn == structure() + "\n", f"docs/design.md's structure block is not the code's; paste:\n{structure()}"
