"""Imports: of process, network, FFI and package-manager modules (hard), of threads, and of the harness itself.
`__import__("m")` and `importlib.import_module("m")` with a constant name count as imports."""

from __future__ import annotations

import ast

from services.static.names import const_str, under
from services.static.process import PROCESS_NAMES, PROCESS_PREFIXES
from services.static.rules import DYNAMIC_CODE, FORBIDDEN_IMPORT, FRAME_INTROSPECTION, THREADING
from services.static.scan import Scan

# Modules whose import alone is a hard reject: processes, sockets and HTTP, FFI, package managers.
FORBIDDEN_MODULES = (
    "subprocess",
    "_posixsubprocess",
    "pty",
    "socket",
    "_socket",
    "ctypes",
    "_ctypes",
    "cffi",
    "multiprocessing",
    "_multiprocessing",
    "torch.multiprocessing",
    "pip",
    "ensurepip",
    "urllib",
    "urllib3",
    "http",
    "requests",
    "httpx",
    "aiohttp",
    "ftplib",
    "smtplib",
    "telnetlib",
    "xmlrpc",
    "asyncio.subprocess",
)
THREAD_MODULES = ("threading", "_thread", "concurrent.futures")
HARNESS_MODULES = ("services",)


def check_module(scan: Scan, node: ast.AST, module: str) -> None:
    """One imported module (or `from m import name` as `m.name`), whichever statement or call imports it."""
    if under(module, FORBIDDEN_MODULES):
        scan.add(FORBIDDEN_IMPORT, node, f"Importing {module} is not allowed in a kernel submission; remove it.")
    elif module in PROCESS_NAMES or module.startswith(PROCESS_PREFIXES):
        scan.add(FORBIDDEN_IMPORT, node, f"Importing {module} (process control) is not allowed; remove it.")
    elif under(module, THREAD_MODULES):
        scan.add(THREADING, node, f"Importing {module}: work must finish on the calling thread before return.")
    elif module == "__main__" or under(module, HARNESS_MODULES):
        scan.add(FRAME_INTROSPECTION, node, f"Importing {module} reaches into the harness; remove it.")


def check_import(scan: Scan, node: ast.Import | ast.ImportFrom) -> None:
    if isinstance(node, ast.Import):
        for a in node.names:
            check_module(scan, node, a.name)
        return
    if node.level:
        return
    module = node.module or ""
    check_module(scan, node, module)
    for a in node.names:  # `from os import system`, `from concurrent import futures`
        check_module(scan, node, f"{module}.{a.name}")


def check_import_call(scan: Scan, node: ast.Call, fname: str) -> None:
    mod = const_str(node.args[0] if node.args else None)
    if mod is None:
        scan.add(DYNAMIC_CODE, node, f"{fname.split('.')[-1]}() with a computed module name; import normally.")
    else:
        check_module(scan, node, mod)


CALLS = {"builtins.__import__": check_import_call, "importlib.import_module": check_import_call}
