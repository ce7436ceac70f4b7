"""The rules `docs/ARCHITECTURE.md` states on which room imports which, held by reading every
module's imports (at its top and inside functions alike): rooms import in one direction, the
package has no import cycle, and the model and the SDK load without numba."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"firmament_py": ROOT / "firmament_py", "firmament_policies": ROOT / "policies"}


def module_name(package: str, path: Path) -> str:
    parts = list(path.relative_to(PACKAGES[package]).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([package, *parts])


def _run_time_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of `tree` but those under `if TYPE_CHECKING:`, which never run."""
    found: list[ast.AST] = []
    pending = [tree]
    while pending:
        node = pending.pop()
        found.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))
    return found


def imports_of(package: str, path: Path) -> set[str]:
    """The package modules `path` imports when it runs, anywhere in it (relative imports
    resolved; imports only a type checker reads are left out)."""
    name = module_name(package, path)
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _run_time_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[: len(here.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    known = set(MODULES)
    return {module for module in found if module in known and module != name}


MODULES: dict[str, Path] = {
    module_name(package, path): path
    for package, root in PACKAGES.items()
    for path in root.rglob("*.py")
}
GRAPH = {
    name: imports_of(name.partition(".")[0], path)
    for name, path in MODULES.items()
    if ".data." not in name
}


def room(module: str) -> str:
    """`firmament_py.sdk.types` -> `sdk`; a top-level module is its own room."""
    parts = module.split(".")
    if parts[0] == "firmament_policies":
        return "policies"
    return parts[1] if len(parts) > 1 else ""


# Each room and the rooms (or modules) it may import; a room always may import itself.
ALLOWED = {
    "model": set(),
    "jit": set(),
    "catalog": set(),
    "flow": {"jit"},
    "solvers": {"flow", "jit", "parent_death", "catalog"},
    "sdk": {"model", "firmament_py.flow.limits", "catalog"},
    "scheduler": {"model", "flow", "jit", "solvers", "sdk"},
    "policies": {"sdk"},
    # The page reads the daemon through its protocol and the simulator through its observer.
    "dashboard": {
        "model",
        "scheduler",
        "firmament_py.service.client",
        "firmament_py.service.keys",
        "firmament_py.sim.simulator",
        "firmament_py.parent_death",
    },
}


@pytest.mark.parametrize("source", sorted(ALLOWED))
def test_a_room_imports_only_the_rooms_below_it(source: str) -> None:
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if room(module) == source
        for target in targets
        if room(target) != source
        and room(target) not in ALLOWED[source]
        and target not in ALLOWED[source]
        and target != "firmament_py"
    )
    assert not wrong, "\n".join(wrong)


def test_the_package_has_no_import_cycle() -> None:
    """Tarjan's strongly connected components over every import, lazy ones included; a
    package's `__init__` re-exporting its modules is not a cycle of theirs."""
    graph = {
        module: {
            t for t in targets if not (MODULES[t].name == "__init__.py" and module.startswith(t))
        }
        for module, targets in GRAPH.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for module in sorted(graph):
        if module not in index:
            visit(module)
    assert not cycles, cycles


@pytest.mark.parametrize("module", ["firmament_py.model", "firmament_py.sdk"])
def test_the_model_and_the_sdk_load_without_numba(module: str) -> None:
    code = f"import sys, {module}; print('numba' in sys.modules)"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert loaded.stdout.strip() == "False"


def test_only_the_daemons_command_names_the_dashboard_and_only_its_address_rule() -> None:
    # `serve` checks the page's address and starts its process by module name; the simulator's
    # and the CLI's own uses aside, nothing reaches into the dashboard.
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if room(module) not in ("dashboard", "cli")
        for target in targets
        if room(target) == "dashboard" and target != "firmament_py.dashboard.address"
    )
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("module", ["firmament_py.service.cli", "firmament_py.catalog"])
def test_the_daemon_starts_without_the_solvers_or_the_sdk(module: str) -> None:
    # The daemon checks its policy and solver by name (`catalog`); its scheduling process is
    # what builds them. Loading them here would cost every restart the compiled kernels.
    heavy = ("numba", "numpy", "firmament_py.solvers", "firmament_py.sdk")
    code = f"import sys, {module}; print([m for m in {heavy!r} if m in sys.modules])"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert loaded.stdout.strip() == "[]"
