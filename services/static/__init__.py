"""Static triage of a candidate source before anything of it executes.

The security boundary of KernelGym is dynamic: the candidate runs in a child process whose timers,
threads, streams, outputs and library coverage are checked while it runs. Static scanning is a
pattern chase (an obfuscated source slips past any list of patterns), so almost everything here is
*advisory*: a finding is reported to the agent and recorded, and the dynamic checks decide.

A short list of codes is *hard* (``HARD_CODES``): the evaluation is rejected without running.
These are constructs a legitimate Triton kernel never needs, so rejecting them costs an honest
candidate nothing: no ``@triton.jit`` kernel at all, importing process/network/FFI modules,
spawning or exiting processes, rebinding timer/sync/harness/library symbols, installing packages,
and flipping global numeric flags that would also change the reference.

The analysis is AST-based and uses only the standard library. Names are resolved through the
candidate's imports and simple aliases (``import torch.cuda as tc``, ``ev = torch.cuda.Event``,
``getattr(torch, "cuda")``, ``__import__("time")``), not through data flow. ``triage`` never raises;
a source that does not parse yields no findings (the dynamic load reports the syntax error). An
``if __name__ == "__main__":`` block is ignored: the loader imports the candidate under another module
name, so it never runs (unless the source rebinds ``__name__``, in which case it is checked).

The rules live in one module per family (imports, process, patching, numerics, precision, compute, caching,
concurrency, dynamic, files, kernels), each with its tables and the walkers that apply them; `rules.RULES` is the
registry of finding codes, and `walk` dispatches every node of one pass to the walkers of its kind.
"""

from __future__ import annotations

from services.static.rules import HARD_CODES, RULES, Finding, Rule
from services.static.walk import triage

__all__ = ["HARD_CODES", "RULES", "Finding", "Rule", "triage"]
