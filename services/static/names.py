"""Names in a candidate resolved to dotted qualnames through its imports and simple aliases.

Not data flow: `import torch.cuda as tc`, `ev = torch.cuda.Event`, `getattr(torch, "cuda")` and
`__import__("time")` resolve, a value computed at run time does not. That is why almost every rule is advisory.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator


def under(name: str, prefixes: Iterable[str]) -> bool:
    """Whether `name` is one of the dotted `prefixes` or inside one (`os.path` is under `os`, `osx` is not)."""
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def const_str(node: ast.AST | None) -> str | None:
    """The value of a string literal, else None: only what the source spells out can be judged statically."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def targets(node: ast.AST) -> Iterator[ast.AST]:
    """Flatten assignment targets (tuples, lists, starred)."""
    if isinstance(node, ast.Tuple | ast.List):
        for elt in node.elts:
            yield from targets(elt)
    elif isinstance(node, ast.Starred):
        yield from targets(node.value)
    else:
        yield node


class Names:
    """Maps local names to dotted qualnames through imports and simple aliases (one flat scope)."""

    def __init__(self, tree: ast.Module) -> None:
        self.alias: dict[str, str] = {}
        self.star: set[str] = set()
        self.bound: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.alias[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        self.alias[top] = top
            elif isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                for a in node.names:
                    if a.name == "*":
                        self.star.add(module)
                    else:
                        self.alias[a.asname or a.name] = f"{module}.{a.name}" if module else a.name
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.bound.add(node.name)
            elif isinstance(node, ast.arg):
                self.bound.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.bound.add(node.id)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self.bound.add(node.name)
        if "__builtins__" not in self.alias and "__builtins__" not in self.bound:
            self.alias["__builtins__"] = "builtins"
        # Simple aliases: `tc = torch.cuda`, `ev = getattr(torch.cuda, "Event")`, `t = __import__("time")`.
        pairs = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                pairs += [(t, node.value) for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and isinstance(node.target, ast.Name) and node.value:
                pairs.append((node.target, node.value))
        for _ in range(3):
            changed = False
            for target, value in pairs:
                q = self.resolve(value)
                if q and self.alias.get(target.id) != q:
                    self.alias[target.id] = q
                    changed = True
            if not changed:
                break

    def resolve(self, node: ast.AST | None) -> str | None:
        """The dotted qualname of a name, attribute chain or constant-argument lookup, else None."""
        if isinstance(node, ast.Name):
            q = self.alias.get(node.id)
        elif isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            q = f"{base}.{node.attr}" if base else None
        elif isinstance(node, ast.Call):
            q = self._resolve_call(node)
        elif isinstance(node, ast.Subscript):
            q = self._resolve_subscript(node)
        else:
            q = None
        if q and q.startswith(("posix.", "nt.")):
            q = "os." + q.split(".", 1)[1]
        return q

    def _resolve_subscript(self, node: ast.Subscript) -> str | None:
        """sys.modules["m"], __builtins__["exec"], m.__dict__["x"], vars(m)["x"] with a constant key."""
        key = const_str(node.slice)
        if key is None:
            return None
        value = node.value
        if isinstance(value, ast.Attribute) and value.attr == "__dict__":
            base = self.resolve(value.value)
        elif isinstance(value, ast.Call) and self.callee(value) == "builtins.vars" and value.args:
            base = self.resolve(value.args[0])
        else:
            base = self.resolve(value)
            if base == "sys.modules":
                return key
            if base != "builtins":
                return None
        return f"{base}.{key}" if base else None

    def _resolve_call(self, node: ast.Call) -> str | None:
        fname = self.callee(node)
        arg0 = node.args[0] if node.args else None
        if fname == "builtins.getattr" and len(node.args) >= 2:
            base, attr = self.resolve(arg0), const_str(node.args[1])
            return f"{base}.{attr}" if base and attr else None
        if fname == "builtins.__import__" and const_str(arg0):
            return const_str(arg0).split(".")[0]
        if fname == "importlib.import_module" and const_str(arg0):
            return const_str(arg0)
        return None

    def callee(self, call: ast.Call) -> str | None:
        """Qualname of what a call calls; an unshadowed bare name is reported as builtins.<name>."""
        func = call.func
        q = self.resolve(func)
        if q:
            return q
        if isinstance(func, ast.Name) and func.id not in self.bound:
            return f"builtins.{func.id}"
        return None

    def is_module_like(self, node: ast.AST) -> bool:
        """True when `node` resolves through the imports (so `node.x(...)` is not a tensor method)."""
        return self.resolve(node) is not None
