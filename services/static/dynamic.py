"""Code built or loaded at run time, and reaching into frames, the harness or other modules' namespaces
(advisory): what a static scan cannot follow, so the agent is told and the dynamic checks decide."""

from __future__ import annotations

import ast

from services.static.rules import DYNAMIC_CODE, FRAME_INTROSPECTION, NameRule
from services.static.scan import Scan

FRAME_NAMES = frozenset(
    {
        "sys._getframe",
        "sys._current_frames",
        "sys.modules",
        "inspect.currentframe",
        "inspect.stack",
        "inspect.getouterframes",
        "inspect.getinnerframes",
        "inspect.trace",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
    }
)
FRAME_ATTRS = frozenset({"f_back", "f_locals", "f_globals", "tb_frame", "gi_frame", "cr_frame", "__globals__"})
DYNAMIC_NAMES = frozenset(
    {"importlib.reload", "types.FunctionType", "types.CodeType", "marshal.loads", "pickle.loads", "dill.loads"}
)

FRAME_RULE = NameRule(FRAME_INTROSPECTION, FRAME_NAMES, "{q} inspects the interpreter or harness state; remove it.")
DYNAMIC_RULE = NameRule(DYNAMIC_CODE, DYNAMIC_NAMES, "{q} loads or builds code at run time; write the code directly.")


def check_exec_call(scan: Scan, node: ast.Call, fname: str) -> None:
    scan.add(DYNAMIC_CODE, node, f"{fname[9:]}() runs generated code; write the code directly.")


def check_vars_call(scan: Scan, node: ast.Call, fname: str) -> None:
    arg0 = node.args[0] if node.args else None
    if arg0 is not None and scan.names.is_module_like(arg0):
        scan.add(FRAME_INTROSPECTION, node, f"vars({scan.names.resolve(arg0)}) reads another module's namespace.")


CALLS = {
    "builtins.exec": check_exec_call,
    "builtins.eval": check_exec_call,
    "builtins.compile": check_exec_call,
    "builtins.vars": check_vars_call,
}


def check_frame_attribute(scan: Scan, node: ast.Name | ast.Attribute) -> None:
    if isinstance(node, ast.Attribute) and node.attr in FRAME_ATTRS:
        scan.add(FRAME_INTROSPECTION, node, f".{node.attr} walks frames or function globals; remove it.")


def check_module_dict(scan: Scan, node: ast.Name | ast.Attribute) -> None:
    if isinstance(node, ast.Attribute) and node.attr == "__dict__" and scan.names.is_module_like(node.value):
        q = scan.names.resolve(node.value)
        scan.add(FRAME_INTROSPECTION, node, f"{q}.__dict__ reads another module's namespace.")
