"""The package layout the README's "Development" section describes: one package per step of the loop, a
small top level, and no import cycle anywhere in ``src/ascendopt``.

The import graph is read with ``ast`` (no import is executed): an edge ``a -> b`` for every
``import``/``from ... import`` of an ``ascendopt`` module anywhere in ``a`` (inside functions too, since a
function-level import that closes a cycle only hides it until the function runs). Importing
``ascendopt.x.y`` also runs ``ascendopt.x/__init__.py``, so that edge is added as well.
"""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "ascendopt"

# What every package uses may sit at the top level; everything else lives in a package.
TOP_LEVEL_LIMIT = 8
STEP_PACKAGES = {"contract", "freeze", "collect", "analyze", "rounds", "gate", "judge", "tune", "device", "kernels",
                 "lint", "cli", "pool"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a module (``ascendopt.a.b.func`` -> ``ascendopt.a.b``)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        candidate = ".".join(parts[:i])
        if candidate in modules:
            return candidate
    return None


def _with_parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def import_graph() -> dict[str, set[str]]:
    """``{module: modules it imports}`` over ``src/ascendopt`` (dotted names)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        here = name.split(".") if is_package else name.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(here[: len(here) - node.level + 1] + ([base] if base else []))
                imported = [base] + [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for item in imported:
                if not item.startswith("ascendopt"):
                    continue
                resolved = _resolve(item, modules)
                if resolved:
                    targets.update(_with_parents(resolved))
        targets.discard(name)
        # a module never "imports" the packages that contain it (Python runs them before it, not from it)
        graph[name] = {t for t in targets if not name.startswith(t + ".")}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_no_import_cycle_in_src():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_cycle_finder_sees_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_graph_sees_function_level_and_package_imports():
    graph = import_graph()
    # cli.__init__ imports its command modules inside a function; ascendopt.cli.gate imports gate.stages
    assert "ascendopt.gate.stages" in graph["ascendopt.cli.gate"] or "ascendopt.gate" in graph["ascendopt.cli.gate"]
    # (outside the gate package: a module never "imports" the package that contains it)
    assert all("ascendopt.gate" in deps for mod, deps in graph.items()
               if "ascendopt.gate.stages" in deps and not mod.startswith("ascendopt.gate."))


def test_top_level_holds_only_shared_modules():
    top_modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top_modules) <= TOP_LEVEL_LIMIT, top_modules
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert packages == STEP_PACKAGES, packages ^ STEP_PACKAGES


def test_tests_mirror_the_packages():
    tests = Path(__file__).resolve().parent
    for package in STEP_PACKAGES:
        assert list((tests / package).glob("test_*.py")), f"no tests/{package}/test_*.py for src/ascendopt/{package}"


def test_scripts_import_only_what_exists():
    """benchmarks/, tools/ and scripts/ are not imported by the tests that cover src/: an ``ascendopt`` import
    they name (in code, or in child-process code kept in a string) must still resolve after a move."""
    import importlib
    import re

    repo = SRC.parent
    pattern = re.compile(r"^[ \t]*from (ascendopt(?:\.\w+)*) import ([\w, ]+)", re.MULTILINE)
    missing = []
    for folder in ("benchmarks", "tools", "scripts"):
        for path in sorted((repo / folder).glob("*.py")):
            for match in pattern.finditer(path.read_text()):
                module_name = match.group(1)
                try:
                    module = importlib.import_module(module_name)
                except ImportError as exc:
                    missing.append(f"{path.relative_to(repo)}: {module_name} ({exc})")
                    continue
                for name in (n.split(" as ")[0].strip() for n in match.group(2).split(",")):
                    if name and not hasattr(module, name) and \
                            importlib.util.find_spec(f"{module_name}.{name}") is None:
                        missing.append(f"{path.relative_to(repo)}: {module_name}.{name}")
    assert not missing, "imports that no longer resolve:\n" + "\n".join(missing)


def _imports_from_above(package: str, above: set[str]) -> dict[str, list[str]]:
    """``{module of ascendopt.<package>: the modules of the packages in ``above`` it imports}``, where any."""
    graph = import_graph()
    found = {module: sorted(t for t in targets if t.split(".")[1:2] and t.split(".")[1] in above)
             for module, targets in graph.items()
             if module == f"ascendopt.{package}" or module.startswith(f"ascendopt.{package}.")}
    return {m: t for m, t in found.items() if t}


def test_the_contract_data_imports_no_step_package():
    """The layers: contract < judge < freeze / gate / rounds / tune < cli. The contract's data model (what is
    frozen, how it is read and validated) runs no step of the loop, so no module of ``ascendopt.contract`` imports
    one; freezing a task, which does, is the ``freeze`` package."""
    assert _imports_from_above("contract", {"judge", "freeze", "gate", "rounds", "tune", "cli"}) == {}


def test_the_judge_imports_no_step_package():
    """The judge (workers, timing engine, evidence and equivalence checks, the frozen test run, statistics)
    produces and checks the evidence that freeze, the gate, the rounds and tuning all rest on, so it is their
    common layer and none of its modules imports one of them, or the CLI: a step uses the judge, never the
    reverse."""
    assert _imports_from_above("judge", {"freeze", "gate", "rounds", "tune", "cli"}) == {}
