"""What every rule family's walkers share while one source is scanned: its tree, its names, its top-level
classes, and the findings so far (one per code and line, the first detail kept)."""

from __future__ import annotations

import ast

from services.static.names import Names, const_str
from services.static.rules import Finding, Rule


class Scan:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.names = Names(tree)
        self.found: dict[tuple[str, int], Finding] = {}
        self.docstrings = _docstring_ids(tree)
        self.classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        # id of every node inside a top-level class -> that class's name
        self.enclosing = {id(sub): name for name, c in self.classes.items() for sub in ast.walk(c)}

    def add(self, rule: Rule, where: ast.AST | int, detail: str) -> None:
        """Record a finding at `where` (a node or a line) unless one of the same code is already on that line."""
        line = where if isinstance(where, int) else getattr(where, "lineno", 0)
        key = (rule.code, line)
        if key not in self.found:
            self.found[key] = Finding(code=rule.code, line=line, detail=detail, hard=rule.hard)

    def results(self) -> list[Finding]:
        return sorted(self.found.values(), key=lambda f: (f.line, f.code))


def _docstring_ids(tree: ast.Module) -> set[int]:
    """Docstrings are prose: a string rule (a package install, a /dev/shm path) must not fire on them."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and const_str(first.value) is not None:
                ids.add(id(first.value))
    return ids
