"""The kernel signatures Triton 3.6 builds a C launcher for in this child, for the parent to build the same launcher
in trusted code for later children (services.launchers).

Triton 3.6 builds one small C module per kernel signature with the C compiler at a kernel's first launch
(`CudaLauncher` calls `make_launcher`, then `compile_module_from_src`), into this child's private cache. Triton 3.7
has one generic launcher and no `make_launcher`: there this records nothing. A candidate can call the hook or
replace it: the parent builds nothing but launchers for signatures made of Triton's type names, so it gains nothing.
"""

from __future__ import annotations

from typing import Any


class LauncherSignatures:
    """`install` wraps Triton's `make_launcher`; `take` returns the signatures seen since the last `take`."""

    def __init__(self) -> None:
        self._seen: list[list[Any]] = []

    def install(self) -> None:
        try:
            from triton.backends.nvidia import driver
        except ImportError:
            return
        make = getattr(driver, "make_launcher", None)
        if make is None:
            return
        seen = self._seen

        def make_launcher(constants: Any, signature: dict[Any, Any], tensordesc_meta: Any) -> Any:
            if not tensordesc_meta:  # a compiled kernel's metadata gives [] where it has no descriptors
                seen.append([_listed(v) for v in signature.values()])
            return make(constants, signature, tensordesc_meta)

        driver.make_launcher = make_launcher

    def take(self) -> list[list[Any]]:
        taken = list(self._seen)
        self._seen.clear()
        return taken


def _listed(value: Any) -> Any:
    """A signature entry as JSON: tuples (a tuple argument's types) become lists."""
    return [_listed(v) for v in value] if isinstance(value, tuple) else value
