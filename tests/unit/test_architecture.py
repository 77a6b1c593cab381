"""The folder is the architecture: controller/ is packages by layer, imports go down, never
round in a circle (controller/*/__init__.py say what each layer may import).

Read from the source (every import statement, those inside functions and under TYPE_CHECKING
included), so that a lazy import cannot hide a layer crossed or a circle closed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the repository's folders and the import package each is under
FOLDERS = {
    "controller": "tablectl.controller",
    "drivers": "tablectl.drivers",
    "simulators": "tablectl.simulators",
    "games": "tablectl.games",
}
#: each layer of controller/ and the layers below it that it may import
LAYERS = ("engine", "common", "record", "floor", "service", "commands")


def module_name(path: Path) -> str:
    folder = path.relative_to(ROOT).parts[0]
    parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([FOLDERS[folder], *parts])


def imports_of(path: Path, name: str) -> set[str]:
    """Every tablectl module `path` imports (`from X import Y` counts X and X.Y: Y may be a
    module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {each for each in found if each.startswith("tablectl.")}


def graph() -> dict[str, set[str]]:
    modules = {
        module_name(path): path for folder in FOLDERS for path in (ROOT / folder).rglob("*.py")
    }
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges[name] = {each for each in imports_of(path, name) if each in modules} - {name}
    return edges


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["tablectl", "controller"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in LAYERS else None


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    found = []
    for module, targets in sorted(edges.items()):
        own = layer_of(module)
        for target in sorted(targets):
            if module.startswith("tablectl.controller.") and own is None:
                continue
            theirs = layer_of(target)
            if own is None:
                continue
            if theirs is None:
                # outside the layers: the root (its version) is anyone's; the engine and the
                # record reach no devices and no simulators
                if target == "tablectl.controller":
                    continue
                if own in ("engine", "common", "record") and not target.startswith(
                    "tablectl.controller"
                ):
                    found.append(f"{module} imports {target} (the {own} touches no device)")
                continue
            if LAYERS.index(theirs) > LAYERS.index(own):
                found.append(f"{module} ({own}) imports {target} ({theirs})")
    return found


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_every_module_of_controller_is_in_a_layer() -> None:
    loose = sorted(
        name
        for name in graph()
        if name.startswith("tablectl.controller.")
        and layer_of(name) is None
        and name != "tablectl.controller.__main__"
    )
    assert loose == [], f"modules outside the layers {LAYERS}: {loose}"


def test_imports_go_down_the_layers() -> None:
    assert upward_imports(graph()) == []


def test_no_import_circle_inside_tablectl() -> None:
    assert circles(graph()) == []


def test_the_checks_find_an_upward_import_and_a_circle() -> None:
    """The two checks can fail: an engine module importing the journal, two modules each
    importing the other."""
    edges = graph()
    edges["tablectl.controller.engine.core"] = edges["tablectl.controller.engine.core"] | {
        "tablectl.controller.record.journal"
    }
    assert upward_imports(edges) == [
        "tablectl.controller.engine.core (engine) imports "
        "tablectl.controller.record.journal (record)"
    ]
    edges["tablectl.controller.record.durable"] = edges["tablectl.controller.record.durable"] | {
        "tablectl.controller.record.sealing"
    }
    assert any("tablectl.controller.record.durable" in each for each in circles(edges))


@pytest.mark.parametrize("layer", LAYERS)
def test_each_layer_says_what_it_may_import(layer: str) -> None:
    doc = ast.get_docstring(ast.parse((ROOT / "controller" / layer / "__init__.py").read_text()))
    assert doc and "may import" in doc
