"""The core's public API (services/__init__.py) is a contract: every name resolves, and naming it imports no
torch until a torch-bound name is used (the gateway imports the schema through the package)."""

from __future__ import annotations

import subprocess
import sys

import services


def test_every_public_name_resolves_from_the_module_that_defines_it():
    assert sorted(services.__all__) == sorted(services._HOMES)
    for name in services.__all__:
        assert getattr(services, name).__module__ == services._HOMES[name]


def test_the_package_and_its_torch_free_names_import_no_torch():
    code = (
        "import sys, services, services.schema\n"
        "from services import EvalResult, EvalSettings, Diagnostics, ReferenceFailed, bundled_problems\n"
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
