"""Every document a person is sent to exists: the `.md` files that alerts, the dashboard and
the example configurations, the unit and the program's own strings (log lines, messages,
help) cite are in the repository (the docs are installed with the wheel, docs/*.md)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from opstools import GRAFANA_DIR, PROMETHEUS_DIR, REPO

CITED = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)\b")
#: Documents cited by name that are not the project's own (the regulation texts' README).
NOT_OURS = {"regs/README.md"}
SOURCES = ("controller", "drivers", "simulators", "games")


def strings_of(path: Path) -> list[str]:
    """The string constants of a Python file (messages, log words, help), docstrings aside."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def cited_documents() -> dict[str, set[str]]:
    """document -> where it is cited."""
    found: dict[str, set[str]] = {}
    shipped = (
        *PROMETHEUS_DIR.glob("*.yml"),
        *GRAFANA_DIR.glob("*"),
        *(REPO / "config").glob("*.toml"),  # `tablectl example-config` prints them
        *(REPO / "systemd").glob("*"),
    )
    texts = [(p, p.read_text()) for p in shipped if p.is_file()]
    for source in SOURCES:
        for path in (REPO / source).rglob("*.py"):
            texts += [(path, text) for text in strings_of(path)]
    for path, text in texts:
        for name in CITED.findall(text):
            found.setdefault(name, set()).add(str(path.relative_to(REPO)))
    return found


def test_every_cited_document_exists() -> None:
    cited = cited_documents()
    assert "docs/rules.md" in cited and "docs/events.md" in cited
    missing = {
        name: sorted(where)
        for name, where in cited.items()
        if name not in NOT_OURS and not (REPO / name).is_file()
    }
    assert not missing, f"cited but not in the repository: {missing}"
