"""Kernel hit: proof that the target kernel ran *and did the work*, not a torch fallback.

Calls of the workload are profiled (after a warm call, so compilation stays out) into a *census*
(``kernel_census``): per kernel name its launches per workload call and its device time, plus the
call's total device time, its host wall time and the host's own time. Freeze stores the baseline's
census in the contract; the gate takes the candidate's and ``judge_census`` compares the two:

* **token launch** (red): the expected kernels' share of device time fell below ``SHARE_FLOOR`` of the
  frozen share *and* the device time of library and torch work (kernels no Triton launch made: aten
  ops, cuBLAS, aclnn) grew by more than ``ELSEWHERE_GROWTH`` of the frozen call's device time: the
  expected kernel is launched, but the work runs in torch ops (Wafer's reward-hack field guide: calls
  to torch ops instead of a kernel; Makora's taxonomy: a PyTorch fallback beside an inert kernel). A
  faster expected kernel alone lowers its share too, but leaves the other work's time where it was:
  it stays green.
* **work moved to the host** (red): the call's device time fell below ``DEVICE_DROP`` of the frozen one
  while at least ``HOST_TAKEOVER`` of the device time saved reappeared as host time, and that growth
  is above ``HOST_NOISE`` of the frozen wall time (Wafer's reward-hack field guide: results computed
  on the CPU, or precomputed, and copied over). An honest faster kernel shrinks device time without
  adding host time. On a device backend the copies over must show: more copies to the device than frozen
  (``TRANSFER_WORDS``), else grown host time is the launch's own cost (an autotuner), not moved work.
* **work gone from the profile** (red): the expected kernels' own work fell to a small fraction of the
  frozen one and nothing in the profile took it up (``unaccounted_work``): their device time per call below
  ``WORK_FLOOR`` of the frozen, the elements they process per call below ``ELEMENTS_FLOOR`` of the frozen,
  and the other kernels and ops gained less than ``ACCOUNTED`` of the device time saved. The shares do not
  move (the whole call's device time collapses with the kernel's), so neither rule above sees it: a token
  launch on one element while host code or a library the profiler does not record (NumPy, pure Python)
  computes the outputs. An honest restructuring that makes the expected kernel much cheaper (a larger block,
  fewer programs, fewer re-reads) still loads and stores the whole input and output, so its elements per
  call stay within ``ELEMENTS_FLOOR``; a split into several launches of the same name keeps the per-call
  total. Elements (the input-size signal): cpu: for an interpreted Triton kernel the lanes its loads, stores
  and atomics touched (masked-out lanes not counted; ``interpreted_elements``); for a torch op or a
  ``record_function`` range the elements of the tensors its aten ops were given (``record_shapes``). cuda and
  npu record none, nor does a census frozen before the signal (and a range doing only Python work records
  0): then the rule stands on device time alone, with the stricter ``DEVICE_ONLY_FLOOR``, and its message
  says so; launches are named in it either way.
* **new kernels that take the time** (reported, not red): names absent from the frozen census that
  together hold at least ``NEW_KERNEL_SHARE`` of the device time (a new Triton kernel beside the
  expected one is often an honest split or helper; the note says where the time is). Changed launch
  counts of the expected kernels are reported too.

Which kernels are Triton launches: the census marks each name ``"triton": true`` when a Triton launch
of that name happened in the profiled call (``triton_launches``: ``JITFunction.run`` compiled,
``InterpretedFunction.run`` on cpu), matched by substring (device names carry suffixes).

What "device time" is per backend: npu: the torch_npu profile's kernel durations; cuda: the device
kernels (and copies) of a torch.profiler trace; cpu: the CPU profile's events, each event's *self*
time charged to the interpreted Triton kernel it runs under (``collect.torch_profiler``'s hook names
every ``kernel[grid](...)`` launch the interpreter runs, own code and bundled kernels alike) or else
to its own name (an ``aten::`` op, a ``record_function`` range). Host time: cpu: the wall time the
profile does not see (Python, NumPy); cuda/npu: the time until the call returns, the device idle
before it (the host's enqueue work; kernels run asynchronously, so a faster kernel does not move it),
the median of ``PLAIN_CALLS`` calls without the profiler (which adds its own cost to every launch).

The pure functions here (``census_names``, ``judge_census``) take census dicts, so the stage can be
judged wherever the census comes from (this process, a workload child).
"""

from __future__ import annotations

import contextlib
import functools
import math
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ascendopt.errors import EnvironmentProblem
from ascendopt.process import own_wait_ns

# The judge's fractions (documented in the README's "what the gate trusts" text):
SHARE_FLOOR = 0.5  # expected kernels' device-time share below half the frozen share ...
ELSEWHERE_GROWTH = 0.25  # ... while the other kernels gained > 25 % of the frozen call's device time: red
DEVICE_DROP = 0.5  # device time below half the frozen one ...
HOST_TAKEOVER = 0.5  # ... and >= half of the device time saved reappeared on the host ...
HOST_NOISE = 0.1  # ... and that host growth > 10 % of the frozen wall time: red
# On a device backend, work the host does only reaches the outputs through a copy to the device (the profiler's
# Memcpy HtoD, an NPU's memory copy): without more of those than frozen, host time that grew is the launch's own
# cost (an autotuner choosing among configurations, Python around the launch), not work moved off the device.
TRANSFER_WORDS = ("memcpy", "memcopy", "htod", "h2d")
NEW_KERNEL_SHARE = 0.1  # new kernel names holding >= 10 % of the device time: reported
# Work gone from the profile (``unaccounted_work``), red when all three hold:
# the expected kernels kept under a quarter of their frozen device time per call: a token launch keeps a few
# percent (one block of the input), and a change that keeps more is not where a large speedup came from
WORK_FLOOR = 0.25
# ... they processed under a tenth of the frozen elements per call: an honest kernel still loads its input and
# stores its output at least once, so its elements fall at most by the frozen kernel's re-reads (reading each
# input 4 times and writing once falls to 2/5 at best); a token launch on one block of an input of more than
# ten blocks falls below it
ELEMENTS_FLOOR = 0.1
# ... and the other kernels and ops gained under half of the device time saved: at half or more the profile
# shows where the work went, and the token-launch rule and the new-kernels note judge it
ACCOUNTED = 0.5
# Without an input-size signal (cuda, npu, a census frozen before it) device time alone decides: red only
# below a twentieth of the frozen device time, four times past the 5x at which the gate already calls a
# whole-call speedup implausible, so an honest faster kernel is not caught by the missing signal
DEVICE_ONLY_FLOOR = 0.05
CENSUS_SCHEMA = 1
CENSUS_CALLS = 3  # profiled calls per census; each name's least time over them is kept (``least_times``)
# unprofiled calls whose median return and wall times are a device census's host and wall time: a profiled
# call's host time carries the profiler's per-launch cost and one call's stalls (a host time measured on
# the profiled call alone rose by half a frozen call on an honest change, an autotuned launch)
PLAIN_CALLS = 5


def kernel_census(fn: Callable[[], Any], calls: int = CENSUS_CALLS) -> dict[str, Any]:
    """Profile ``calls`` calls of ``fn`` one by one (after one warm call) and return their census
    (``least_times``), a JSON-able dict::

        {"schema": 1, "backend": "cpu" | "cuda" | "npu", "device_us": total device time of the call,
         "wall_us": the call's wall time (device synchronized before and after), "host_us": host time
         outside device work (see the module docstring), "kernels": {name: {"calls": launches in the
         call, "device_us": its device time, "share": device_us / total, "elements": elements it processed in
         the call (cpu only; see the module docstring)}}}

    Times in microseconds; ``kernels`` longest device time first. Several calls, each name's least time: a
    call stalled by the machine (another process, a page fault, a GC pause, a throttled control group) adds
    time to whichever kernel or op it stalled in, and would otherwise move the shares and the work the
    kernel-hit stage judges; an unchanged tree must stay green. On cpu each call's times are also read less
    the run-queue wait of the calling thread (``_census_of_one_call``): on a loaded host every call is
    stretched, not one.
    """
    from ascendopt.device import backends

    backend = backends.current()
    fn()  # compile outside the profile
    backend.synchronize()
    taken = [_census_of_one_call(fn, backend) for _ in range(max(1, calls))]
    census = least_times(taken)
    if backend.name != "cpu":
        wall_us, host_us = plain_call_times(fn, backend)
        census = {**census, "wall_us": round(wall_us, 3), "host_us": round(host_us, 3)}
    return census


def least_times(taken: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One census from the censuses of several calls of the same workload: the names, launches and elements
    of the call whose device time is the median; each name's device time the least it took over the calls
    with the same launches (a machine's stall only adds time, the work does not vary between calls); the
    host time the least over the calls. Shares are recomputed from those times (``make_census``)."""
    base = sorted(taken, key=lambda c: c["device_us"])[len(taken) // 2]
    device, counts, elements = {}, {}, {}
    for name, kernel in base["kernels"].items():
        same = [c["kernels"][name]["device_us"] for c in taken
                if name in c["kernels"] and c["kernels"][name]["calls"] == kernel["calls"]]
        device[name], counts[name] = min(same), kernel["calls"]
        if "elements" in kernel:
            elements[name] = kernel["elements"]
    host_us = min(float(c["host_us"]) for c in taken)
    triton = {name for name, kernel in base["kernels"].items() if kernel.get("triton")}
    wall_us = host_us + sum(device.values()) if base["backend"] == "cpu" else float(base["wall_us"])
    return make_census(base["backend"], device, counts, wall_us, host_us, triton,
                       elements if any("elements" in k for k in base["kernels"].values()) else None)


def plain_call_times(fn: Callable[[], Any], backend, calls: int = PLAIN_CALLS) -> tuple[float, float]:
    """``(wall_us, host_us)`` of a warm ``fn`` on a device backend, each the median of ``calls`` unprofiled
    calls: wall from the device synchronized before the call to synchronized after it; host until the call
    returned (the host's own work and its enqueueing; kernels run asynchronously)."""
    walls, hosts = [], []
    for _ in range(max(1, calls)):
        backend.synchronize()
        t0 = time.perf_counter()
        fn()
        returned = time.perf_counter()
        backend.synchronize()
        walls.append((time.perf_counter() - t0) * 1e6)
        hosts.append((returned - t0) * 1e6)
    return sorted(walls)[len(walls) // 2], sorted(hosts)[len(hosts) // 2]


def _census_of_one_call(fn: Callable[[], Any], backend) -> dict[str, Any]:
    """``kernel_census`` of one profiled call of a warm ``fn``: device time by name, launches; on cpu the host
    time is the call's wall time the profile does not see; on a device backend ``kernel_census`` replaces
    the wall and host time with those of unprofiled calls (``plain_call_times``).

    cpu: the "device" is the host's CPU and its times are wall times, so the time the calling thread waited
    on a run queue during the call (runnable, not running: a loaded host, a throttled control group) is taken
    out, from every name and the host time in proportion to their share of the call (where it cannot be read,
    not Linux: the times as measured)."""
    elements = None
    if backend.name == "npu":
        with triton_launches() as triton:
            totals, counts = _profile_npu(fn)
        wall_us = host_us = 0.0
    else:
        totals, counts, wall_us, returned_us, triton, elements, waited_us = _profile_torch(fn, backend)
        if backend.name == "cpu" and waited_us and wall_us > 0:
            ran = max(0.0, 1.0 - waited_us / wall_us)
            totals = {name: us * ran for name, us in totals.items()}
            wall_us *= ran
        device = sum(totals.values())
        host_us = max(0.0, wall_us - device) if backend.name == "cpu" else returned_us
    return make_census(backend.name, totals, counts, wall_us, host_us, triton, elements)


def make_census(backend: str, device_us: Mapping[str, float], calls: Mapping[str, float], wall_us: float,
                host_us: float, triton: set[str] | frozenset[str] = frozenset(),
                elements: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The census dict from per-name device time (us) and launch counts of one call; ``triton``: the names
    of the Triton kernels launched in it (a census name containing one is marked ``"triton": true``);
    ``elements``: per name the elements processed in the call, on a backend that records them (None: it
    does not, and the census has no ``"elements"``)."""
    total = float(sum(device_us.values()))
    names = sorted(set(device_us) | set(calls), key=lambda n: (-device_us.get(n, 0.0), n))
    kernels = {n: {"calls": calls.get(n, 0), "device_us": round(float(device_us.get(n, 0.0)), 3),
                   "share": round(device_us.get(n, 0.0) / total, 6) if total > 0 else 0.0,
                   "triton": any(t in n for t in triton)}
               for n in names}
    if elements is not None:
        for n, kernel in kernels.items():
            kernel["elements"] = int(elements.get(n, 0))
    return {"schema": CENSUS_SCHEMA, "backend": backend, "device_us": round(total, 3), "wall_us": round(wall_us, 3),
            "host_us": round(host_us, 3), "kernels": kernels}


@contextlib.contextmanager
def triton_launches():
    """The names of the Triton kernels launched (compiled, ``JITFunction.run``) while open; an empty set
    where triton is missing. The interpreter's launches are named by ``collect.torch_profiler``'s hook."""
    names: set[str] = set()
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:
        yield names
        return
    original = JITFunction.run

    def run(self, *args, **kwargs):
        if not kwargs.get("warmup"):
            names.add(getattr(self.fn, "__name__", str(self.fn)))
        return original(self, *args, **kwargs)

    JITFunction.run = run
    try:
        yield names
    finally:
        JITFunction.run = original


# the interpreter's memory operations and the position of their mask (None: every lane): each is called by
# the plain and block-pointer loads and stores, so counting these counts every access once
_MEMORY_OPS = {"create_masked_load": 1, "create_masked_store": 2, "create_atomic_rmw": 3, "create_atomic_cas": None}


@contextlib.contextmanager
def interpreted_elements():
    """Per Triton kernel name, the lanes the interpreter's loads, stores and atomics touched (masked-out lanes
    not counted) while open: the elements the kernel processed, whatever its block size or grid. Charged to
    the outermost interpreted launch running. An empty dict where triton or its interpreter's builder is
    missing (the census then says it has no elements for those kernels)."""
    import numpy as np

    counts: dict[str, int] = {}
    try:
        from triton.runtime import interpreter
    except ImportError:
        yield counts
        return
    builder = getattr(interpreter, "interpreter_builder", None)
    launcher = getattr(interpreter, "InterpretedFunction", None)
    if builder is None or launcher is None or not all(hasattr(builder, op) for op in _MEMORY_OPS):
        yield counts
        return
    running: list[str] = []
    original_run = launcher.run

    def run(self, *args, **kwargs):
        if kwargs.get("warmup"):
            return original_run(self, *args, **kwargs)
        running.append(getattr(self.fn, "__name__", "triton_kernel"))
        try:
            return original_run(self, *args, **kwargs)
        finally:
            running.pop()

    def counted(op: str, mask_at: int | None):
        method = getattr(builder, op)

        def call(*args, **kwargs):
            if running:
                ptrs = np.asarray(args[0 if op != "create_atomic_rmw" else 1].data)
                mask = args[mask_at] if mask_at is not None and len(args) > mask_at else None
                lanes = (int(np.count_nonzero(np.broadcast_to(np.asarray(mask.data), ptrs.shape)))
                         if mask is not None else int(ptrs.size))
                counts[running[0]] = counts.get(running[0], 0) + lanes
            return method(*args, **kwargs)

        return call

    shadowed = {op: vars(builder)[op] for op in _MEMORY_OPS if op in vars(builder)}
    launcher.run = run
    for op, mask_at in _MEMORY_OPS.items():
        setattr(builder, op, counted(op, mask_at))  # an instance attribute, over the class's method
    try:
        yield counts
    finally:
        launcher.run = original_run
        for op in _MEMORY_OPS:
            if op in shadowed:
                setattr(builder, op, shadowed[op])
            else:
                delattr(builder, op)


def _profile_torch(fn: Callable[[], Any], backend):
    """cpu/cuda: per-name device time and launches of one profiled call; its wall and return time (us); the
    names of the Triton kernels it launched; cpu: per name the elements processed (``make_census``), cuda:
    None (the trace has no input-size signal read here); the time (us) the calling thread waited on a run
    queue during the call (None where it cannot be read)."""
    from torch.autograd import DeviceType
    from torch.autograd.profiler import profile

    from ascendopt.collect.native_log import quiet_profiler
    from ascendopt.collect.torch_profiler import name_interpreted_kernels

    # The kineto profile torch.profiler.profile(activities=[CPU(, CUDA)]) takes, opened directly: the wrapper's
    # first start imports torch._inductor (to read one cudagraphs setting; 1.3 s on the 2-core CPU host), a
    # cost every census and every timed side's profiled call would pay once per worker.
    device = "cuda" if backend.name == "cuda" else None
    # cpu: the hook names every interpreted kernel[grid](...) launch (own code and bundled kernels)
    cpu = backend.name == "cpu"
    naming = name_interpreted_kernels() if cpu else contextlib.nullcontext(set())
    lanes = interpreted_elements() if cpu else contextlib.nullcontext({})
    # the profiler's own lines and warnings would break the progress line: kept off the terminal; cpu records
    # the aten ops' input shapes, the input-size signal of torch ops and record_function ranges
    with (naming as launched, lanes as interpreted, triton_launches() as compiled, quiet_profiler(),
          profile(use_kineto=True, use_cpu=True, use_device=device, record_shapes=cpu) as prof):
        backend.synchronize()
        waited = own_wait_ns()
        t0 = time.perf_counter()
        fn()
        returned = time.perf_counter()
        backend.synchronize()
        wall = time.perf_counter() - t0
        after = own_wait_ns()
    waited_us = (after - waited) / 1e3 if waited is not None and after is not None else None
    totals: dict[str, float] = {}
    counts: dict[str, int] = {}
    elements: dict[str, int] | None = None
    if backend.name == "cuda":
        for event in prof.function_events:
            if event.device_type == DeviceType.CUDA:
                totals[event.name] = totals.get(event.name, 0.0) + float(event.device_time_total)
                counts[event.name] = counts.get(event.name, 0) + 1
    else:
        elements = {}
        _cpu_totals(prof.function_events, set(launched or ()), totals, counts, elements)
        elements.update(interpreted)  # an interpreted kernel's own accesses, not the aten ops copying its args
    return totals, counts, wall * 1e6, (returned - t0) * 1e6, set(launched or ()) | compiled, elements, waited_us


def _cpu_totals(events, kernels: set[str], totals: dict[str, float], counts: dict[str, int],
                elements: dict[str, int] | None = None) -> None:
    """Each CPU event's self time charged to the outermost interpreted kernel it runs under (one launch
    per such outermost range: the bundled launcher and the hook open one range each), else to itself;
    ``elements``: per name, the input elements of each launch (``_input_elements``)."""
    for event in events:
        owner = None
        node = event
        while node is not None:
            if node.name in kernels:
                owner = node  # keep climbing: the outermost range of a kernel is its launch
            node = node.cpu_parent
        name = owner.name if owner is not None else event.name
        totals[name] = totals.get(name, 0.0) + float(event.self_cpu_time_total)
        if owner is None or owner is event:
            counts[name] = counts.get(name, 0) + 1
            if elements is not None and owner is None:
                elements[name] = elements.get(name, 0) + _input_elements(event)


def _input_elements(event) -> int:
    """The elements of the tensors an event was given (its recorded input shapes); an event given none (a
    ``record_function`` range, a factory op) or a view (``_returns_a_view``: a slice of the whole input moves
    none of it) counts those of the events it encloses (a copy a view op may make runs in them)."""
    shapes = [s for s in (getattr(event, "input_shapes", None) or ()) if _is_shape(s) and s]
    if shapes and not _returns_a_view(event.name):
        return sum(math.prod(s) for s in shapes)
    return sum(_input_elements(child) for child in getattr(event, "cpu_children", ()) or ())


@functools.cache
def _returns_a_view(name: str) -> bool:
    """An op whose schema returns an alias of an input it does not write (``aten::slice``, ``aten::view``,
    ``aten::to``): it moves no data itself. False for names that are no registered op."""
    import torch

    namespace, _, op = name.partition("::")
    try:
        packet = getattr(getattr(torch.ops, namespace), op)
        schemas = [getattr(packet, overload)._schema for overload in packet.overloads()]
    except (AttributeError, RuntimeError):
        return False
    return any(r.alias_info is not None and not r.alias_info.is_write for s in schemas for r in s.returns)


def _is_shape(shape: Any) -> bool:
    return isinstance(shape, (list, tuple)) and all(isinstance(d, int) for d in shape)


def _profile_npu(fn: Callable[[], Any]) -> tuple[dict[str, float], dict[str, int]]:
    try:
        from ascendopt.analyze.traces import load_profile
        from ascendopt.collect import profile_callable
    except ImportError as exc:
        raise EnvironmentProblem(
            f"kernel-hit check on npu needs ascendopt.collect and ascendopt.traces ({exc})") from None
    with tempfile.TemporaryDirectory(prefix="ascendopt-hit-") as tmp:
        # one warm step and one active step: the kernels frame is one call
        path = profile_callable(fn, name="kernel_hit", out_dir=Path(tmp), aic_metrics="PipeUtilization")
        frame = load_profile(path).kernels
        grouped = frame.groupby("name")["duration_us"]
        return ({str(k): float(v) for k, v in grouped.sum().items()},
                {str(k): int(v) for k, v in grouped.size().items()})


def census_names(census: Mapping[str, Any]) -> list[str]:
    """The kernel names of a census, longest device time first."""
    return list(census.get("kernels", {}))


def observed_kernels(fn: Callable[[], Any]) -> list[str]:
    """Names seen in a profile of one call of ``fn`` (after one warm call), longest device time first
    (``kernel_census``)."""
    return census_names(kernel_census(fn))


def missing_kernels(expected: tuple[str, ...] | list[str], seen: list[str]) -> list[str]:
    """Expected names (or ``regex:`` patterns) that no observed name matches (``analyze.matching``)."""
    from ascendopt.analyze.matching import unmatched

    return unmatched(expected, seen)


# -- the judgement ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CensusFinding:
    """One line of the census comparison: ``red`` findings turn the kernel-hit stage red (exit 1)."""

    name: str  # "expected share" | "host time" | "new kernels" | "launch counts"
    red: bool
    message: str


def expected_us(census: Mapping[str, Any], expected: Sequence[str]) -> float:
    """Device time (us) of the kernels matching any of ``expected`` (``analyze.matching``)."""
    from ascendopt.analyze.matching import matches_any

    return sum(k["device_us"] for n, k in census.get("kernels", {}).items() if matches_any(n, expected))


def library_us(census: Mapping[str, Any], expected: Sequence[str]) -> float:
    """Device time (us) of the work no Triton launch did (aten ops, vendor libraries), expected kernels aside."""
    from ascendopt.analyze.matching import matches_any

    return sum(k["device_us"] for n, k in census.get("kernels", {}).items()
               if not k.get("triton") and not matches_any(n, expected))


def expected_work(census: Mapping[str, Any], expected: Sequence[str]) -> tuple[float, int, int | None]:
    """``(device_us, launches, elements)`` per call of the kernels matching ``expected``; ``elements`` None
    when the census records none for one of them (cuda, npu, a census taken before the signal)."""
    from ascendopt.analyze.matching import matches_any

    matched = [k for n, k in census.get("kernels", {}).items() if matches_any(n, expected)]
    sizes = [k.get("elements") for k in matched]
    elements = sum(sizes) if sizes and all(isinstance(e, (int, float)) for e in sizes) else None
    return (float(sum(k["device_us"] for k in matched)), int(sum(k["calls"] for k in matched)),
            None if elements is None else int(elements))


def unaccounted_work(frozen: Mapping[str, Any], now: Mapping[str, Any], expected: Sequence[str]) -> str | None:
    """The expected kernels' work vanished from the profile: their device time per call fell below
    ``WORK_FLOOR`` of the frozen, their elements per call below ``ELEMENTS_FLOOR`` of the frozen, and the
    other kernels and ops gained under ``ACCOUNTED`` of the device time saved -> the red message (one line:
    frozen and current device time per call, launches, elements per launch; where the work must have gone).
    Without elements in both censuses (or none at freeze): device time alone, below ``DEVICE_ONLY_FLOOR``,
    said in the message. None: the work is accounted for (module docstring)."""
    f_us, f_calls, f_elems = expected_work(frozen, expected)
    n_us, n_calls, n_elems = expected_work(now, expected)
    if f_us <= 0:
        return None
    sized = f_elems is not None and n_elems is not None and f_elems > 0
    if n_us >= (WORK_FLOOR if sized else DEVICE_ONLY_FLOOR) * f_us:
        return None
    if sized and n_elems >= ELEMENTS_FLOOR * f_elems:
        return None  # the whole input still goes through the expected kernels: they became cheaper
    saved = f_us - n_us
    gained = (float(now["device_us"]) - n_us) - (float(frozen["device_us"]) - f_us)
    if gained >= ACCOUNTED * saved:
        return None  # the profile shows where the time went: the other rules and notes judge it

    def figures(us: float, calls: int, elements: int | None) -> str:
        per_launch = f", {elements / calls:.0f} elements per launch" if elements is not None and calls else ""
        return f"{us:.1f} us device time in {calls} launch(es){per_launch}"

    if sized:
        rule = (f"red below {WORK_FLOOR:.0%} of the frozen device time with below {ELEMENTS_FLOOR:.0%} of the "
                "frozen elements")
    else:
        why = "none at freeze" if f_elems is not None else "not on this backend, or not in the frozen census"
        rule = (f"input size not recorded ({why}): judged on device time alone, red below "
                f"{DEVICE_ONLY_FLOOR:.0%} of the frozen device time")
    return (f"the expected kernels did {figures(n_us, n_calls, n_elems)} per call (frozen "
            f"{figures(f_us, f_calls, f_elems)}); the rest of the profile gained {max(gained, 0.0):.1f} us of the "
            f"{saved:.1f} us saved: the work must run outside the profiled kernels: host code or a library the "
            f"profiler does not record ({rule})")


def _transfers(census: Mapping[str, Any]) -> tuple[int, float]:
    """(launches, device us) of the census's copies to the device (names with one of ``TRANSFER_WORDS``)."""
    found = [k for name, k in census.get("kernels", {}).items()
             if any(word in name.lower() for word in TRANSFER_WORDS)]
    return sum(int(k.get("calls", 0)) for k in found), sum(float(k.get("device_us", 0.0)) for k in found)


def _more_transfers(frozen: Mapping[str, Any], now: Mapping[str, Any]) -> bool:
    """Whether ``now`` copies to the device more than ``frozen``: more copies, or copies longer by more than
    ``HOST_NOISE`` of the frozen wall time."""
    (f_calls, f_us), (n_calls, n_us) = _transfers(frozen), _transfers(now)
    return n_calls > f_calls or n_us - f_us > HOST_NOISE * float(frozen.get("wall_us") or 0.0)


def judge_census(frozen: Mapping[str, Any], now: Mapping[str, Any], expected: Sequence[str]) -> list[CensusFinding]:
    """Compare the candidate's census ``now`` with the ``frozen`` one (both ``kernel_census`` dicts).

    Returns one finding per rule (module docstring): ``expected share``, ``host time`` and ``expected work``
    always (red or not; ``expected work`` is not red where one of the two before it is: the profile or the
    host shows where the work went), ``new kernels`` and ``launch counts`` only when there is something to
    report.
    """
    from ascendopt.analyze.matching import matches_any

    def pct(x: float) -> str:
        return f"{x:.0%}"

    f_total, n_total = float(frozen["device_us"]), float(now["device_us"])
    f_exp, n_exp = expected_us(frozen, expected), expected_us(now, expected)
    f_share = f_exp / f_total if f_total > 0 else 0.0
    n_share = n_exp / n_total if n_total > 0 else 0.0
    findings = []
    moved = library_us(now, expected) - library_us(frozen, expected)
    token = n_share < SHARE_FLOOR * f_share and moved > ELSEWHERE_GROWTH * f_total
    share_text = (f"the expected kernels hold {pct(n_share)} of {n_total:.1f} us device time (frozen "
                  f"{pct(f_share)} of {f_total:.1f} us)")
    if token:
        top = [n for n, k in now["kernels"].items() if not k.get("triton") and not matches_any(n, expected)][:3]
        findings.append(CensusFinding("expected share", True, f"{share_text}: torch and library work gained "
                                      f"{moved:.1f} us ({', '.join(top)}): a token launch of the expected kernel "
                                      f"while the work runs elsewhere (red below {SHARE_FLOOR:.0%} of the frozen "
                                      f"share with > {ELSEWHERE_GROWTH:.0%} of the frozen device time moved)"))
    else:
        findings.append(CensusFinding("expected share", False, share_text))

    f_host, n_host = float(frozen["host_us"]), float(now["host_us"])
    saved, grown = f_total - n_total, n_host - f_host
    host_share = n_host / now["wall_us"] if now.get("wall_us") else 0.0
    host_text = (f"host time {n_host:.1f} us of a {now['wall_us']:.1f} us call ({pct(host_share)}; frozen "
                 f"{f_host:.1f} us of {frozen['wall_us']:.1f} us)")
    to_host = (n_total < DEVICE_DROP * f_total and grown >= HOST_TAKEOVER * saved
               and grown > HOST_NOISE * float(frozen["wall_us"])
               and (now.get("backend") == "cpu" or _more_transfers(frozen, now)))
    if to_host:
        findings.append(CensusFinding("host time", True, f"{host_text}: device time fell by {saved:.1f} us and the "
                                      f"host gained {grown:.1f} us: work moved to the host (red when device time "
                                      f"falls below {DEVICE_DROP:.0%} and >= {HOST_TAKEOVER:.0%} of the saving "
                                      "reappears on the host)"))
    else:
        findings.append(CensusFinding("host time", False, host_text))

    gone = None if token or to_host else unaccounted_work(frozen, now, expected)
    if gone:
        findings.append(CensusFinding("expected work", True, gone))
    else:
        f_us, f_calls, f_elems = expected_work(frozen, expected)
        n_us, n_calls, n_elems = expected_work(now, expected)
        sizes = (f", {n_elems} elements (frozen {f_elems})" if f_elems is not None and n_elems is not None
                 else "; elements not recorded")
        findings.append(CensusFinding("expected work", False, f"the expected kernels did {n_us:.1f} us device "
                                      f"time in {n_calls} launch(es) per call (frozen {f_us:.1f} us in {f_calls})"
                                      + sizes))

    new = {n: k for n, k in now["kernels"].items() if n not in frozen["kernels"] and not matches_any(n, expected)}
    new_share = sum(k["device_us"] for k in new.values()) / n_total if n_total > 0 else 0.0
    if new and new_share >= NEW_KERNEL_SHARE:
        names = ", ".join(f"{n} {k['share']:.0%}" for n, k in list(new.items())[:4])
        findings.append(CensusFinding("new kernels", False, f"kernels not in the frozen census take "
                                      f"{pct(new_share)} of the device time: {names}"))
    counts = []
    for pattern in expected:
        f_calls = sum(k["calls"] for n, k in frozen["kernels"].items() if matches_any(n, [pattern]))
        n_calls = sum(k["calls"] for n, k in now["kernels"].items() if matches_any(n, [pattern]))
        if f_calls != n_calls:
            counts.append(f"{pattern} {n_calls} launch(es) per call (frozen {f_calls})")
    if counts:
        findings.append(CensusFinding("launch counts", False, "; ".join(counts)))
    return findings


def kernel_hit_stage(expected: Sequence[str], census: Mapping[str, Any], frozen: Mapping[str, Any] | None):
    """The kernel-hit stage from the candidate's ``census`` and the contract's ``frozen`` census (None: a
    contract frozen before censuses, only the names are checked, said in a check). Red (exit 1) when an
    expected name is missing or a ``judge_census`` finding is red; its findings are the stage's checks."""
    from ascendopt.judge.result import Check, StageResult

    seen = census_names(census)
    missing = missing_kernels(list(expected), seen)
    checks = [Check(name, name not in missing, "seen" if name not in missing else "not in the profile")
              for name in expected]
    data: dict[str, Any] = {"seen": seen[:50], "census": census}
    if missing:
        return StageResult("kernel_hit", "fail",
                           f"expected kernel(s) {', '.join(missing)} did not run (torch fallback?); "
                           f"the profile shows: {', '.join(seen[:8]) or 'nothing'}", checks, data)
    if frozen is None:
        checks.append(Check("kernel census", True, "not compared: the contract has no kernel census (frozen by "
                                                   "an older ascendopt); re-freeze to compare where the time goes"))
        return StageResult("kernel_hit", "pass", f"{', '.join(expected)} ran", checks, data)
    findings = judge_census(frozen, census, expected)
    checks += [Check(f.name, not f.red, f.message) for f in findings]
    data["findings"] = [{"name": f.name, "red": f.red, "message": f.message} for f in findings]
    red = [f for f in findings if f.red]
    if red:
        return StageResult("kernel_hit", "fail", f"{', '.join(expected)} ran, but {red[0].message}", checks, data)
    reported = [f.message for f in findings if f.name in ("new kernels", "launch counts")]
    return StageResult("kernel_hit", "pass", f"{', '.join(expected)} ran; {findings[0].message}"
                       + "".join(f"; note: {m}" for m in reported), checks, data)
