"""The untrusted side: what runs next to candidate (and reference) code, in a child process.

- `__main__`: the entry point (`python -m services.child ...`, started by `services.sandbox.Child`): cuts
  the network, sets limits, imports torch, waits for its job;
- `runtime.Runtime`: serves the job's commands (load, call, time, profile, deliver, release);
- `guards`: launch recording, integrity snapshot and audit hook installed before the candidate is imported.
- `interpreter_shims`: in CPU mode, what a GPU run gives user code (autotuning, CUDA devices, fp32 float
  arguments, libdevice, TF32 dots, compile errors), installed by `services.devices.enable_cpu_redirect`;
- `compiler`: a compiler child (DEVICE `compiler`, no GPU in reach) compiles the candidate's Triton kernels for
  the parent's GPU from one forward() on meta tensors, before the candidate child's first call.

Nothing here compares, reduces statistics or decides a verdict. Importing this package imports nothing: the
entry point must stay single-threaded and torch-free until it has cut the network.
"""
