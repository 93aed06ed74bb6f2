"""The filesystem (advisory): state persisted across calls or runs, absolute paths, /dev/shm. The child's audit
hook refuses writes outside its private directory at run time."""

from __future__ import annotations

import ast

from services.static.names import const_str
from services.static.rules import FILE_IO, NameRule
from services.static.scan import Scan

FILE_NAMES = frozenset(
    {
        "os.remove",
        "os.unlink",
        "os.rename",
        "os.renames",
        "os.replace",
        "os.makedirs",
        "os.mkdir",
        "os.rmdir",
        "os.removedirs",
        "os.symlink",
        "os.link",
        "os.truncate",
        "os.open",
        "os.mkfifo",
        "torch.save",
        "torch.load",
        "pickle.dump",
        "pickle.load",
        "numpy.save",
        "numpy.savez",
        "numpy.load",
    }
)
FILE_METHODS = frozenset(
    {"write_text", "write_bytes", "touch", "unlink", "rmdir", "symlink_to", "hardlink_to", "tofile"}
)
WRITE_MODES = "wax+"

FILE_RULE = NameRule(
    FILE_IO, FILE_NAMES, "{q} touches the filesystem; kernels must not persist state in files.", ("shutil.",)
)


def check_open(scan: Scan, node: ast.Call, fname: str) -> None:
    path = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "file"), None)
    mode_node = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
    mode = const_str(mode_node) if mode_node is not None else "r"
    writes = mode is None or any(c in mode for c in WRITE_MODES)
    const_path = const_str(path)
    if const_path is not None and const_path.startswith(("/", "~")):
        scan.add(FILE_IO, node, f"open({const_path!r}) uses an absolute path; kernels must not touch files.")
    elif writes and const_path is None:
        scan.add(FILE_IO, node, "open() for writing with a computed path; kernels must not persist state in files.")


def check_file_method(scan: Scan, node: ast.Call, method: str) -> None:
    scan.add(FILE_IO, node, f".{method}() touches the filesystem; kernels must not persist state in files.")


CALLS = {"builtins.open": check_open, "io.open": check_open}
METHODS = dict.fromkeys(FILE_METHODS, check_file_method)


def check_shm_text(scan: Scan, node: ast.Constant) -> None:
    if isinstance(node.value, str) and id(node) not in scan.docstrings and "/dev/shm" in node.value:
        scan.add(FILE_IO, node, "/dev/shm path: kernels must not persist state across calls or runs.")
