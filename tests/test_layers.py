"""The house rules of DESIGN.md, checked: imports run one way (core ← estimators, advantages,
controllers, frictions, policies, envs, objectives ← tasks ← runtime ← cli), the library never imports
``simulations`` (figures come through one hook), no import cycle, no library file over 400 lines."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "sandbox"
#: a module may import from its own layer or any lower one
LAYER = {"core": 0, "estimators": 1, "advantages": 1, "controllers": 1, "frictions": 1, "policies": 1, "envs": 1,
         "kernels": 1, "objectives": 1, "diagnostics": 1, "tasks": 2, "methods": 2, "runtime": 3, "analysis": 3, "scoring": 4, "check": 4,
         "reproduce": 4, "reproduce_costs": 4, "claims_file": 4,
         "cli": 5, "cli_args": 5, "cli_run": 5, "cli_score": 5, "cli_check": 5, "__init__": 5}
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
        assert not module.startswith("simulations"), f"{path.name} imports {module}: use sandbox.reproduce.figures()"
        if module.startswith("sandbox."):
            other = module.split(".")[1]
            assert LAYER[other] <= LAYER[me], f"{path.relative_to(ROOT)} ({me}) imports {module} ({other}): upward"


def test_no_import_cycle_between_modules():
    names = {f: "sandbox." + ".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") for f in FILES}
    graph = {names[f]: {m for m in _imports(f) if m.startswith("sandbox.")} for f in FILES}
    graph = {k: {m for m in v if m in graph and m != k and not k.startswith(m + ".")} for k, v in graph.items()}
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " → ".join(stack[stack.index(nxt):] + [node, nxt]))
            if nxt not in state:
                visit(nxt, stack + [node])
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node, [])


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_library_file_over_400_lines(path):
    assert len(path.read_text().splitlines()) <= 400
