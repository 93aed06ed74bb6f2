"""The untrusted side: a child process that maps inputs to outputs, and nothing else.

Started by `sandbox.Child` as `python -m services.child IN_FD OUT_FD DEVICE MEM_MB FILE_MB`, DEVICE being `cuda`,
`cpu` or `compiler` (no GPU: services.child.compiler). It cuts itself off
the network while it is still single-threaded, imports torch and initialises the device (so it waits warm),
then serves one job: load the reference (and, in a candidate child, the candidate), generate inputs from seeds
the parent sends, run forwards, time calls and deliver tensors. It never compares, reduces statistics or
decides anything; every reply carries the job's nonce and a sequence number. Harness functions used
after the candidate is imported are bound here, before it is. A child is either started as that command or forked
by the zygote (services.child.zygote), which has done the imports and Triton's host-side warm-up once
(`import_harness`); `start` then runs from the network's isolation on, as a started child does.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import sys
import time

from services import procfs
from services.child.seccomp import PR_SET_NO_NEW_PRIVS, confine_signals, refuse_sockets


def _isolate_network() -> str:
    """A private network namespace (no interfaces but a down loopback); must run single-threaded."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError as exc:
        return f"none (libc unavailable: {exc})"
    clone_newnet, clone_newuser = 0x40000000, 0x10000000
    if libc.unshare(clone_newnet) == 0:
        return "netns"
    first = ctypes.get_errno()
    if libc.unshare(clone_newuser | clone_newnet) == 0:
        return "userns+netns"
    return f"none (unshare: {errno.errorcode.get(first, first)})"


# Landlock (x86_64 and aarch64 share the generic numbers): landlock_create_ruleset, _add_rule, _restrict_self.
_LANDLOCK_CREATE, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT = 444, 445, 446
# Filesystem rights that change what is on disk, by Landlock ABI: write a file, remove or make an entry of any kind
# (1), move or link one across directories (2), truncate (3). Reading, executing and device ioctls stay open.
_WRITE_RIGHTS = {1: 0b1_1111_1111_0010, 2: 0b11_1111_1111_0010, 3: 0b111_1111_1111_0010}
_DEVICE_RIGHTS = 0b100_0000_0000_0010  # write (or truncate) a device node that exists: the GPU's, /dev/null
# In /dev/shm, torch's CUDA IPC counting files of the parent's shared buffers: a consumer opens one that exists
# (never creating it), writes its count, and unlinks it if it closes it last; it never truncates one, and one
# truncated would kill the parent, which maps it, with SIGBUS.
_SHARED_MEMORY_RIGHTS = 0b10_0010  # write a file, remove a file


def _confine_writes(private_dir: str) -> str:
    """A Landlock ruleset that this process and everything it starts keep for life: a file is written, made,
    removed, moved or truncated only beneath `private_dir` (its Triton cache, HOME and TMPDIR are there); in
    /dev/shm a file that exists is written or removed, nothing made or truncated; and otherwise only the device nodes
    in /dev are written to (not /dev/mqueue). Native code cannot get
    past it: the audit hook sees Python's `open`, not torch's own writers (`torch.from_file(..., shared=True)`
    wrote where it was told), and a file planted in another child's Triton cache, or in the seed every GPU child's
    cache starts from, would be code in later children, references' among them. Where the kernel has no Landlock,
    the audit hook alone stands."""

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    libc = ctypes.CDLL(None, use_errno=True)

    def failed(step: str) -> str:
        return f"none (landlock {step}: {errno.errorcode.get(ctypes.get_errno(), '?')})"

    abi = libc.syscall(_LANDLOCK_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))  # the ABI version
    if abi < 1:
        return failed("version")
    handled = _WRITE_RIGHTS[min(abi, 3)]
    attr = ctypes.c_uint64(handled)  # struct landlock_ruleset_attr's first field, which every ABI accepts alone
    ruleset = libc.syscall(_LANDLOCK_CREATE, ctypes.byref(attr), ctypes.c_size_t(8), ctypes.c_uint32(0))
    if ruleset < 0:
        return failed("ruleset")
    try:
        try:
            devices = [os.path.join("/dev", n) for n in sorted(os.listdir("/dev")) if n not in ("shm", "mqueue")]
        except OSError:
            devices = []  # /dev unreadable: only the device nodes already open stay writable
        rules = [
            (private_dir, handled),
            ("/dev/shm", _SHARED_MEMORY_RIGHTS),
            *((d, _DEVICE_RIGHTS & handled) for d in devices),
        ]
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a device node gone since it was listed
            try:
                added = libc.syscall(_LANDLOCK_ADD_RULE, ruleset, 1, ctypes.byref(PathBeneath(rights, fd)), 0)
            finally:
                os.close(fd)
            if added != 0 and path == private_dir:
                return failed("rule")
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.syscall(_LANDLOCK_RESTRICT, ruleset, 0) != 0:
            return failed("restrict")
    finally:
        os.close(ruleset)
    return f"landlock ABI {abi}"


def _keep_descendants() -> str:
    """Make this process a subreaper: a process it starts that loses its parent (the middle of a fork, `setsid`,
    fork) is reparented to it, not to the host's init, so everything it started stays below it while it lives and
    dies with it (services.sandbox.Child.kill); once it is gone, its orphans go to the zygote, which kills them.
    Not a PID namespace: one made for its children fails every later thread it starts (clone with CLONE_THREAD
    returns EINVAL while its children's namespace is not its own), and one it is in itself fails CUDA IPC, which
    the parent's buffers use (cudaErrorOperatingSystem, measured on an H100)."""
    PR_SET_CHILD_SUBREAPER = 36
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        return f"none (subreaper: {errno.errorcode.get(ctypes.get_errno(), '?')})"
    return "subreaper"


def _drop_capabilities() -> str:
    """A child of a root worker holds every capability (loading kernel modules, mounts, rebooting, reading any
    process's memory); after the trusted warm-up it needs none. Empty its ambient, inheritable, permitted and
    effective sets: with no_new_privs set (the seccomp filters and Landlock set it), nothing it executes regains
    one. The bounding set is emptied too where the child may (CAP_SETPCAP). A child without capabilities has nothing
    to drop."""
    with open("/proc/self/status") as f:
        held = next((int(line.split()[1], 16) for line in f if line.startswith("CapEff:")), 0)
    if not held:
        return "none held"
    libc = ctypes.CDLL(None, use_errno=True)
    PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except OSError:
        last = 63  # the numbers past the kernel's own last one fail with EINVAL
    bounding = ""
    for cap in range(last + 1):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            bounding = f" (bounding set kept: {errno.errorcode.get(ctypes.get_errno(), '?')})"
            break
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable for each 32-capability half: all empty
    if libc.capset(header, data) != 0:
        return f"held (capset: {errno.errorcode.get(ctypes.get_errno(), '?')})"
    return "dropped" + bounding


def _hide_devices() -> int:
    """Put the GPU out of this process's reach before any user code runs: where the child may (root, or a user
    namespace), /dev/null is bound over every NVIDIA device node in a private mount namespace; and the CUDA
    driver is initialised under the empty CUDA_VISIBLE_DEVICES this child was started with, so that changing the
    variable later does not bring a GPU back (tests/services/test_gpu.py checks it). The devices the driver then sees (0
    expected)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES") != "":
        raise RuntimeError("a compiler child must be started with CUDA_VISIBLE_DEVICES empty")
    libc = ctypes.CDLL(None, use_errno=True)
    clone_newns, ms_rec, ms_private, ms_bind = 0x00020000, 0x4000, 0x40000, 0x1000
    nodes = [os.path.join("/dev", n) for n in os.listdir("/dev") if n.startswith("nvidia")]
    if nodes and libc.unshare(clone_newns) == 0 and libc.mount(None, b"/", None, ms_rec | ms_private, None) == 0:
        for node in nodes:
            libc.mount(b"/dev/null", os.fsencode(node), None, ms_bind, None)
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0  # no driver on this machine: no GPU to reach
    libcuda.cuInit(0)
    count = ctypes.c_int(0)
    libcuda.cuDeviceGetCount(ctypes.byref(count))
    return count.value


def _limit_resources(mem_mb: int, file_mb: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_mb << 20, file_mb << 20))
    if mem_mb:  # CPU children only: CUDA reserves far more address space than it uses.
        # Address space, not memory: a backstop that makes absurd allocations fail cleanly. The parent's
        # watchdog enforces the real (resident) limit; the headroom covers torch's library mappings.
        limit = (mem_mb + 16384) << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def warm_triton_host() -> None:
    """Triton's once-per-process work that needs no GPU, done while the child waits (or once, in the zygote)
    rather than in the candidate's first call, which holds the device: the hash of Triton's own build that every
    compilation's cache key includes (a SHA-256 of the 400+ MB libtriton.so, about 0.4 s of CPU), and the import
    of Triton's Gluon front end, which a first launch's argument specialisation pulls in on Triton 3.6 (0.17 s of
    an H200 child's first call). Trusted code: no user code has run yet. Where it fails (a Triton whose internals
    moved), the first call does this work as before: it saves time and decides nothing."""
    try:
        from triton.runtime.cache import triton_key

        triton_key()
        import triton.experimental.gluon  # noqa: F401
    except Exception as exc:  # informational only, on the child's stderr
        print(f"kernelgym child: Triton's warm-up skipped: {exc!r}", file=sys.stderr)


def _warm_triton_device() -> None:
    """A GPU child's share of the warm-up: Triton's driver module (built with the C compiler into this child's
    private cache, or found there planted) and the ptxas version, through the backend's hash."""
    try:
        from triton.compiler.compiler import make_backend
        from triton.runtime import driver

        make_backend(driver.active.get_current_target()).hash()
    except Exception as exc:
        print(f"kernelgym child: Triton's warm-up skipped: {exc!r}", file=sys.stderr)


def _warm_device_code() -> None:
    """Device code the harness's own requests launch, loaded while the child waits rather than in the job's first
    requests: CUDA loads a kernel on its first launch (torch's lazy module loading), and in a fresh H200 process
    the first int64 sum took 79 ms, the first randn 25 ms and the first matmul (the cuBLAS handle) 136 ms, all of
    which an evaluation's first calls paid, and its first timed call inside the timing slot. Covers the input
    generators, the output digest (its int32 and byte views), poisoning, copies and comparisons in the floating
    dtypes problems use, and a matmul and a convolution per dtype under the reference's FLOP counter (a problem's
    first convolution, cuDNN's handle, took 90 ms after the rest of this warm-up and 11 ms after all of it:
    bench/first_use.py): 0.45 s of a waiting child's CPU and 200 MiB of its device memory (most of it cuBLAS's) on
    an H200. Trusted code: no user code has run yet. It saves time and decides nothing; where it fails, the first
    requests load what they need as before."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from services.protocol.tensors import fingerprint

    try:
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            for n in (256, 255):
                x = torch.randn(n, device="cuda", dtype=dtype)
                y = torch.rand(n, device="cuda", dtype=dtype)
                fingerprint([x, y]).tolist()
                torch.equal(x, y.clone())
                x.fill_(float("nan"))
            a = torch.randn(16, 16, device="cuda", dtype=dtype)
            image, weight = (torch.randn(*shape, device="cuda", dtype=dtype) for shape in ((1, 4, 8, 8), (4, 4, 3, 3)))
            with FlopCounterMode(display=False):
                a @ a
                torch.nn.functional.conv2d(image, weight)
        torch.randint(0, 8, (255,), device="cuda").fill_(7)
        torch.empty(256, dtype=torch.int32, device="cuda").zero_()
        torch.cuda._sleep(1)
        torch.cuda.synchronize()
    except Exception as exc:
        print(f"kernelgym child: the device code's warm-up stopped: {exc!r}", file=sys.stderr)


def import_harness() -> None:
    """What every child imports before it is ready; once per process (a forked child's zygote did it). torch._dynamo
    is imported while the child waits rather than on first use: it takes seconds to import and rewraps
    torch.manual_seed when it does, which the integrity snapshot would report as tampering; the reference's FLOP
    counter and a candidate's use of streams or graphs can pull it in."""
    if "torch._dynamo" in sys.modules:
        return
    import torch
    import torch._dynamo
    import torch.utils.flop_counter
    import triton  # noqa: F401

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)


def main() -> None:
    start(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))


def start(in_fd: int, out_fd: int, device: str, mem_mb: int, file_mb: int) -> None:
    """Isolate, limit and warm this process, say it is ready, then serve one job."""
    from services.protocol.messages import START_STAGE

    def stage(step: str) -> None:  # for the parent's error if this start runs past its limit
        with open(START_STAGE, "w") as f:
            f.write(step)

    stage("isolating the network")
    network = _isolate_network()
    stage("containing the processes it will start")
    processes = _keep_descendants()
    signals = confine_signals()
    if device == "compiler" and _hide_devices():
        raise RuntimeError("a compiler child must see no GPU")
    _limit_resources(mem_mb, file_mb)
    # Keep the private channel away from anything the child execs.
    os.set_inheritable(in_fd, False)
    os.set_inheritable(out_fd, False)

    stage("importing torch")
    import_harness()
    import torch

    from services.device_lock import wait_between_measurements
    from services.errors import ProtocolError
    from services.protocol import channel
    from services.protocol.messages import (
        NEEDED_NOW,
        START_NO_DEVICE_MEMORY,
        WARM_UP_BETWEEN,
        Job,
        Ready,
        parse_command,
        reply_header,
    )
    from services.schema import PROTOCOL_VERSION

    between = os.environ.pop(WARM_UP_BETWEEN, "")  # never seen by user code
    waits: list[tuple[float, float]] = []  # when it waited for a gap, on the host's monotonic clock

    def between_measurements() -> None:
        if between:
            stage("waiting for a gap between measurements")
            want, most_s = between.rsplit(":", 1)
            began = time.monotonic()
            needed = os.path.join(os.getcwd(), NEEDED_NOW)
            waits.append((began, began + wait_between_measurements(want, float(most_s), needed)))

    if device == "cuda":
        # Outside the device's slot: a measurement waits for every request in flight, and a context's creation
        # under load takes seconds, which kept the whole device idle behind it.
        between_measurements()
        stage("creating the CUDA context")
        try:
            torch.cuda.init()
            torch.empty(1, device="cuda")
        except Exception as exc:  # torch.OutOfMemoryError or AcceleratorError, as the torch version has it
            if "out of memory" not in str(exc):
                raise
            print(f"no device memory for a CUDA context: {exc}", file=sys.stderr)
            raise SystemExit(START_NO_DEVICE_MEMORY) from None
    if device in ("cuda", "compiler"):
        stage("warming Triton")
        warm_triton_host()
        if device == "cuda":
            _warm_triton_device()
            between_measurements()
            stage("loading the harness's device code")
            _warm_device_code()
    stage("ready")
    # After the trusted warm-up, before anything of a request. Undumpable: no other process of the user reads or
    # writes this one's memory (a kept reference child serves later candidates: one candidate that changed it would
    # change how the next are judged).
    procfs.undumpable()
    files = _confine_writes(os.getcwd())
    network = f"{network}; sockets: {refuse_sockets()}"
    capabilities = _drop_capabilities()
    from services.child.runtime import Runtime

    ready = Ready(
        pid=os.getpid(),
        network=network,
        processes=processes,
        signals=signals,
        files=files,
        capabilities=capabilities,
        waits=waits,
    )
    channel.send(out_fd, reply_header(ready))
    header, _ = channel.recv(in_fd)
    job = parse_command(header)
    if not isinstance(job, Job):
        return
    if job.protocol != PROTOCOL_VERSION:
        raise ProtocolError(f"job of protocol {job.protocol}, this child speaks {PROTOCOL_VERSION}")
    if device == "compiler":
        from services.child.compiler import serve

        serve(job, in_fd, out_fd)
        return
    first = job
    while True:
        job = Runtime(job, in_fd, out_fd).serve()
        if not isinstance(job, Job):
            return
        # A reference child serves further jobs of its own problem, each with a fresh runtime: the new job's
        # nonce, seeds and model, nothing kept of the last one's tensors or mappings. A candidate child never does.
        if job.protocol != PROTOCOL_VERSION or not (
            first.role == job.role == "reference" and job.reference_source == first.reference_source
        ):
            raise ProtocolError(f"a {job.role} job for a child that served a {first.role} job")
