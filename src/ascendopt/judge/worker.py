"""The judge's worker: one warm, isolated process per source tree, serving every request of a command.

Started by ``judge.interleave._Child`` as ``python -I -m ascendopt.judge.worker EXEC_FILE --path TREE [--path
TREE/src] [--seed]``. ``-I`` (isolated mode) keeps ``PYTHONPATH``, the user site-packages and the current
directory off ``sys.path``, so nothing of the repository under test runs at interpreter start-up (a
``sitecustomize``/``usercustomize`` or a package shadowing the harness in the tree). The worker then binds
what the verdict rests on -- the protocol pipe, the clock, the device timer, torch's tensor type and the
functions that fingerprint outputs -- as local names of ``main``, makes the trees' files load from their
source and never from cached byte code (``judge.sources``; a workload that undoes it is an integrity failure at
its next reply), and only then puts the tree on ``sys.path`` explicitly and runs the workload file's module
code once (imports, compile, autotune). A workload that later patches ``time.perf_counter``,
``torch.cuda.Event.elapsed_time`` or an ``ascendopt`` module attribute changes nothing the worker already
bound; what it can still reach (the device timer's class, this process) only changes the worker's *second*
reading, which the parent checks against its own clock (``judge.engine``).

Protocol: one JSON object per line on the process's original stdout (the workload's own stdout goes to
stderr). Once the harness is bound: ``{"bound": true}``; after the module code: ``{"ready": true, "inputs":
bool, "shapes": bool}`` (``inputs``: the file defines a callable ``inputs(seed)``; ``shapes``: it takes a
shape too). Every reply is one JSON line, followed by ``nbytes`` bytes when it says so. Requests:

* ``{"cmd": "null"}`` -> ``{}``: the round trip the parent calibrates and subtracts;
* ``{"cmd": "kernels"}`` -> ``{"census": ...}``: ``kernel_hit.kernel_census`` of one call (after a warm
  one), passed on unchanged;
* ``{"cmd": "outputs", "path"}`` -> ``judge.equivalence.call_and_save`` of one call (with ``inputs(seed)``:
  on the inputs of seed 0): freeze's check that the frozen commit repeats itself;
* ``{"cmd": "make", "seeds", "shape"?}`` -> the payload (``judge.payload``) of ``inputs(seed)`` (or ``inputs(seed,
  shape)``) for each seed: the trusted maker's request, sent to the frozen commit's worker only;
* ``{"cmd": "prepare", "calls"}`` with a payload of input sets (or ``"seeds"``, ``"shape"``: made here, for sets
  too large to hand over; or neither: the workload's own inputs, ``calls`` times) -> ``{}``: the next timed batch;
* ``{"cmd": "go"}`` -> ``{"ms", "out"}``: the prepared batch, called back to back and synchronized; ``ms`` is the
  worker's own reading per call (device events on npu/cuda, ``perf_counter`` on cpu), a second reading beside
  the parent's; ``out`` says where each output is in memory (``judge.payload.describe``), so that the parent
  reads host-memory outputs itself while this process is stopped;
* ``{"cmd": "check", "full", "audit"}`` -> ``{"outputs": [fingerprint per call]}`` and a payload: the last
  batch's outputs read from raw memory (all, or the ``audit`` call; ``audit`` -1: only the fingerprints),
  then released;
* ``{"cmd": "call"}`` with a payload of input sets (or none: the workload's own inputs) -> a payload of
  ``{"outputs", "inputs"}``: the differential check's untimed calls, and the inputs after them; with
  ``"function": "module:qualname"``, that function of the tree is called instead, each input set an ``[args,
  kwargs]`` pair: the frozen tests' own calls, replayed (``judge.testcalls``); with ``"tolerate": true``, a call
  that raises is answered in ``{"raised": [message or null per call]}`` (its output null) and the worker goes
  on: the differential check's value probe;
* ``{"cmd": "probe", "shapes"}`` -> ``{"errors"}``: whether ``inputs(seed, shape)`` makes each shape;
* ``{"cmd": "loaded"}`` -> ``{"loaded"}``: the sha256 of every tree file this worker compiled;
* ``{"cmd": "modules"}`` -> ``{"files": [absolute paths]}``: the file of every module loaded so far (the
  module code and the calls made), after one call of its own when none was made yet; freeze's default
  target code (``judge.scope.repository_files``);
* ``{"cmd": "exit"}``.

A failure is answered ``{"error": message, "exit_code": N}`` and the worker exits.
"""

from __future__ import annotations

import json
import os
import sys
from importlib import import_module
from pathlib import Path
from typing import Any

SAMPLES = 4096  # elements sampled (evenly strided) per output for the group sums of a fingerprint
GROUPS = 8  # interleaved groups of the samples, each summed on its own (a wrong block cannot hide)


def bind_ops(torch) -> Any:
    """The torch functions ``fingerprint`` uses, bound once before the tree is imported (a workload that
    later replaces ``torch.sum`` or a ``torch.Tensor`` method does not change the harness's copies)."""
    from types import SimpleNamespace

    from ascendopt.judge.equivalence import flatten

    return SimpleNamespace(Tensor=torch.Tensor, flatten=flatten, sum=torch.sum, abs=torch.abs, where=torch.where,
                           isfinite=torch.isfinite, zeros_like=torch.zeros_like, arange=torch.arange,
                           div=torch.div, view_as_real=torch.view_as_real, reshape=torch.reshape,
                           to=torch.Tensor.to, detach=torch.Tensor.detach, numel=torch.Tensor.numel, cat=torch.cat,
                           storage=torch.Tensor.untyped_storage, is_complex=torch.is_complex,
                           float64=torch.float64, long=torch.long, indices={})


def fingerprint(value: Any, ops, light: bool = False) -> dict[str, Any]:
    """A cheap, tolerance-aware summary of what one call returned.

    ``{"parts": {name: entry}, "skipped": [names]}`` over the tensors ``judge.equivalence.flatten`` finds;
    an entry is ``{"problem": why}`` for a tensor that is not a plain, materialized one (a subclass such as
    a lazy or fake tensor, a meta or non-strided tensor, one without storage), else ``{"dtype", "shape",
    "sum", "abs", "n", "nonfinite"}``: fp64 sums of the whole tensor (index 0) and of ``GROUPS`` interleaved
    groups of ``SAMPLES`` evenly strided elements (indices 1..), their sums of absolute values and element
    counts. ``compare_fingerprints`` bounds each sum's difference by ``atol * n + rtol * abs``, which
    elementwise ``|c - b| <= atol + rtol * |b|`` implies (the triangle inequality), so an output within the
    contract's tolerance always passes.
    """
    tensors, skipped = ops.flatten(value)
    parts: dict[str, Any] = {}
    for name, t in tensors.items():
        if type(t) is not ops.Tensor:
            parts[name] = {"problem": f"a {type(t).__module__}.{type(t).__name__}, not a plain torch.Tensor"}
            continue
        if ops.numel(t) and ops.storage(t).data_ptr() == 0:
            parts[name] = {"problem": "a tensor without storage (not materialized)"}
            continue
        flat = ops.reshape(ops.detach(t), (-1,))
        if ops.is_complex(flat):
            flat = ops.reshape(ops.view_as_real(flat), (-1,))
        x = ops.to(flat, dtype=ops.float64)
        n = ops.numel(x)
        finite = ops.isfinite(x)
        x = ops.where(finite, x, ops.zeros_like(x))
        k = 0 if light else min(n, SAMPLES) // GROUPS * GROUPS  # evenly strided samples, GROUPS groups of them
        if k:
            idx = ops.indices.get((n, x.device))
            if idx is None:  # the same positions for every tensor of this size: made once
                idx = ops.to(ops.div(ops.arange(k, device=x.device, dtype=ops.float64) * n, k,
                                     rounding_mode="floor"), dtype=ops.long)
                ops.indices[(n, x.device)] = idx
            groups = ops.reshape(x[idx], (-1, GROUPS))
            sums = ops.cat([ops.reshape(ops.sum(x), (1,)), ops.sum(groups, 0)])
            abss = ops.cat([ops.reshape(ops.sum(ops.abs(x)), (1,)), ops.sum(ops.abs(groups), 0)])
            counts = [n] + [k // GROUPS] * GROUPS
        else:
            sums, abss, counts = ops.reshape(ops.sum(x), (1,)), ops.reshape(ops.sum(ops.abs(x)), (1,)), [n]
        summary = ops.cat([sums, abss, ops.reshape(ops.to(n - ops.sum(finite), dtype=ops.float64), (1,))]).tolist()
        width = len(counts)
        sums, abss, nonfinite = summary[:width], summary[width:2 * width], int(summary[-1])
        parts[name] = {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "sum": sums,
                       "abs": abss, "n": counts, "nonfinite": nonfinite}
    return {"parts": parts, "skipped": skipped}


def _functions_of(paths: list[str]) -> dict[tuple[str, str], Any]:
    """``{(module, name): object}`` of every callable attribute of each loaded module whose file lies under one of
    ``paths`` (the tree), read now."""
    roots = tuple(os.path.realpath(p) + os.sep for p in paths)
    held: dict[tuple[str, str], Any] = {}
    for module in list(sys.modules.values()):
        where = getattr(module, "__file__", None)
        if isinstance(where, str) and os.path.realpath(where).startswith(roots):
            held.update({(module.__name__, name): value for name, value in list(vars(module).items())
                         if callable(value)})
    return held


def main(argv: list[str]) -> None:
    # The pipe and the clock first: nothing of the tree has run yet, and these names stay bound here.
    proto = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # anything the workload prints goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    requests = sys.stdin.buffer
    readline, read = requests.readline, requests.read
    dumps, loads = json.dumps, json.loads

    def send(reply: dict[str, Any], blob: bytes | None = None) -> None:
        if blob is not None:
            reply = {**reply, "nbytes": len(blob)}
        # a raw pipe write may be partial (a signal, a stop and continue, during a reply larger than the pipe
        # holds): written on until every byte is
        rest = memoryview(dumps(reply).encode() + b"\n" + (blob or b""))
        while rest:
            rest = rest[proto.write(rest):]

    import faulthandler

    faulthandler.enable()  # a crash leaves the Python stack (with the workload's line) on stderr
    exec_file = argv[0]
    paths = [argv[i + 1] for i, a in enumerate(argv) if a == "--path"]
    seed = "--seed" in argv
    if "--private" in argv:  # a trusted tree's worker: no other process of this user may read or write its memory
        _not_dumpable()
    from ascendopt.judge.sources import harness_roots, load_from_source

    # the judge's own modules load from their source from here on (no planted byte code of the harness runs)
    load_from_source(harness_roots(("ascendopt",)))
    try:
        import torch

        from ascendopt.collect.workload import guard
        from ascendopt.device import backends
        from ascendopt.errors import AscendoptError, IntegrityError, UsageError
        from ascendopt.judge.autotune_pin import install_pin
        from ascendopt.judge.equivalence import call_and_save, module_inputs
        from ascendopt.judge.interleave import load_workload
        from ascendopt.judge.kernel_hit import kernel_census
        from ascendopt.judge.payload import RawReader, decode, describe, encode
        from ascendopt.judge.sources import loaded, replaced
    except Exception as exc:  # noqa: BLE001 - the harness itself could not start: an environment problem
        send({"error": f"the worker could not start: {type(exc).__name__}: {exc}", "exit_code": 5})
        sys.exit(1)
    backend = backends.current()
    synchronize, make_timer, manual_seed = backend.synchronize, backend.timer, torch.manual_seed
    device = backend.torch_device()
    ops = bind_ops(torch)
    fp = fingerprint
    reader = RawReader(torch, synchronize)
    to_device = torch._C.TensorBase.to
    modes = _sentinels(torch)
    # the trees' files load from their source, never from a cached byte code file (judge.sources)
    load_from_source(paths)
    send({"bound": True, "reader": reader.through})  # the harness is up: the module-code limit starts now
    # only now the tree, explicitly (isolated mode put neither it nor the current directory there)
    sys.path[0:0] = paths
    try:
        if seed:
            _seed(torch)
        pin = install_pin()  # --auto on own code: one @triton.autotune config pinned (judge.autotune_pin)
        fn = load_workload(Path(exec_file))
        if pin is not None and not pin.applied:
            raise UsageError(f"the workload's module code never decorated {pin.kernel} with @triton.autotune: "
                             "nothing was pinned")
        namespace = getattr(fn, "module_globals", {})
        held = _functions_of(paths)  # what a caller holds after importing the tree: the replay's targets
        make = namespace.get("inputs")
        takes_shape = callable(make) and _takes_shape(make)
        make = guard(make, Path(exec_file)) if callable(make) else None
        fn = fn.with_inputs if make is not None else fn  # the judge makes the inputs: workload(*args)

        def inputs_of(s: int, shape: list[list[int]] | None = None) -> tuple:
            if make is None:
                return ()
            manual_seed(s)
            made = make(s) if shape is None else make(s, shape)
            return tuple(made) if isinstance(made, (tuple, list)) else (made,)

        def on_device(value: Any) -> Any:
            """Decoded inputs (CPU tensors) as fresh tensors on the device, the structure kept: the layout, and a
            leaf that requires grad is again such a leaf (as the caller's was)."""
            if isinstance(value, ops.Tensor):
                moved = to_device(value, device=device, copy=True)
                return moved.detach().requires_grad_(True) if value.requires_grad else moved
            if type(value) in (tuple, list):
                return type(value)(on_device(v) for v in value)
            if type(value) is dict:
                return {k: on_device(v) for k, v in value.items()}
            return value

        send({"ready": True, "inputs": make is not None, "shapes": takes_shape})
        batch: list[tuple] = [()]
        outs: list[Any] = []
        called = False  # any workload() call made yet (the modules a call imports count as the workload's)
        while True:
            line = readline()
            if not line:
                break
            msg = loads(line)
            blob = read(int(msg["nbytes"])) if "nbytes" in msg else None
            cmd = msg["cmd"]
            out_blob = None
            if cmd == "null":
                reply: dict[str, Any] = {}
            elif cmd == "go":
                timer = make_timer()
                synchronize()
                timer.start()
                outs = [fn(*args) for args in batch]
                ms = timer.stop()
                # where the outputs are, so that the parent reads them itself while this process is stopped
                reply = {"ms": ms / max(1, len(batch)), "out": describe(outs, reader), "in": describe(batch, reader)}
            elif cmd == "check":
                # the returned values of the last batch, read from their memory: every call's in full, or
                # (``full`` false: large outputs) a fingerprint of each and the ``audit`` call's in full
                _quiet()
                audit = int(msg.get("audit", 0))
                if audit < 0:  # the parent read the outputs itself: only the fingerprints (a second line)
                    reply = {"outputs": [fp(o, ops) for o in outs]}
                elif msg.get("full"):
                    out_blob = encode(outs, reader)
                    reply = {"outputs": []}
                else:
                    out_blob = encode([outs[audit]] if outs else [], reader)
                    reply = {"outputs": [fp(o, ops) for o in outs]}
                outs = []
            elif cmd == "prepare":
                # the input sets of the next timed batch: bytes the trusted maker made, or (no inputs(seed))
                # ``calls`` calls on the workload's own inputs
                if blob is not None:
                    batch = [tuple(on_device(s)) for s in decode(blob, grad=True)]
                elif "seeds" in msg:  # too large to hand over: made here from seeds given only now
                    batch = [inputs_of(int(s), msg.get("shape")) for s in msg["seeds"]]
                else:
                    batch = [()] * int(msg["calls"])
                synchronize()
                reply = {}
            elif cmd == "make":
                # the trusted maker (a worker of the frozen tree): the input sets of ``seeds``, as bytes
                shape = msg.get("shape")
                if shape is not None and not takes_shape:
                    raise UsageError(f"{exec_file}: inputs(seed) takes no shape: define inputs(seed, shape=None) to "
                                     "make the inputs of the contract's shape mix")
                out_blob = encode([inputs_of(int(s), shape) for s in msg["seeds"]], reader)
                reply = {}
            elif cmd == "probe":
                # freeze: can inputs(seed, shape) make each of ``shapes``? -> the error per shape ("" when it can)
                errors = []
                for shape in msg["shapes"]:
                    if not takes_shape:
                        errors.append("inputs(seed) takes no shape: define inputs(seed, shape)")
                        continue
                    try:
                        inputs_of(0, shape)
                        errors.append("")
                    except Exception as exc:  # noqa: BLE001 - named to the user, per shape
                        errors.append(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
                reply = {"errors": errors}
            elif cmd == "call":
                # untimed calls for the judge's differential check: each input set once, the outputs and
                # the inputs after the call as bytes; without inputs: one call on the module's own inputs
                _quiet()
                if msg.get("function"):  # the frozen tests' own calls of a function of the tree (judge.testcalls)
                    module, _, name = str(msg["function"]).partition(":")
                    # the object the module held when the tree was loaded (as ``from op import my_op`` holds it), not
                    # what its name is bound to after the calls since
                    target = held[module, name] if (module, name) in held else getattr(import_module(module), name)
                    sets = [on_device(s) for s in decode(blob, grad=True)]
                    results = []
                    for args, kwargs in sets:  # each call from the same random state on both sides
                        _seed(torch)
                        results.append(target(*args, **kwargs))
                    synchronize()
                    out_blob = encode({"outputs": results, "inputs": sets}, reader)
                    reply = {}
                elif blob is not None:
                    sets = [tuple(on_device(s)) for s in decode(blob, grad=True)]
                    raised: list[str | None] = []
                    results = []
                    for args in sets:
                        if not msg.get("tolerate"):
                            results.append(fn(*args))
                            continue
                        try:  # the value probe: inputs off the workload's range may be refused by honest code
                            results.append(fn(*args))
                            raised.append(None)
                        except Exception as exc:  # noqa: BLE001 - reported to the judge, which compares sides
                            results.append(None)
                            raised.append(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
                    synchronize()
                    out_blob = encode({"outputs": results, "inputs": sets}, reader)
                    reply = {"raised": raised} if msg.get("tolerate") else {}
                else:
                    before = encode(module_inputs(namespace), reader)
                    result = fn()
                    synchronize()
                    out_blob = before + encode({"outputs": [result], "inputs": module_inputs(namespace)}, reader)
                    reply = {"before": len(before)}
            elif cmd == "kernels":
                args0 = inputs_of(0)
                reply = {"census": kernel_census(lambda a=args0: fn(*a))}
            elif cmd == "outputs":
                args0 = inputs_of(0)
                space = {"inputs": list(args0)} if make is not None else namespace
                reply = call_and_save(lambda a=args0: fn(*a), Path(msg["path"]), space)
            elif cmd == "modules":
                if not called:
                    fn(*inputs_of(0))
                    synchronize()
                reply = {"files": sorted({os.path.abspath(f) for f in
                                          (getattr(m, "__file__", None) for m in list(sys.modules.values()))
                                          if isinstance(f, str)})}
            elif cmd == "loaded":
                reply = {"loaded": loaded()}
            else:
                break
            called = called or cmd in ("go", "kernels", "outputs", "modules", "call")
            undone = replaced()
            if undone:
                raise IntegrityError(f"{', '.join(undone)}: the judge's source-only import was undone by the "
                                     "workload (a cached byte code file could run instead of the tree's source)")
            active = modes()
            if active:
                raise IntegrityError(f"{active} was left active by the workload in the judge's worker (it could "
                                     "change what the judge reads)")
            send(reply, out_blob)
    except AscendoptError as exc:
        send({"error": str(exc), "exit_code": int(exc.exit_code)})
        sys.exit(1)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, with the traceback in the worker's log
        import traceback

        traceback.print_exc()
        send({"error": f"{type(exc).__name__}: {exc}", "exit_code": 70})
        sys.exit(1)


def _not_dumpable() -> None:
    """``prctl(PR_SET_DUMPABLE, 0)`` (Linux): ptrace and ``/proc/PID/mem`` of this process are closed to other
    processes of the user (not to root); elsewhere nothing."""
    import ctypes

    try:
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    except (OSError, AttributeError):
        pass


def _takes_shape(make: Any) -> bool:
    """Whether the workload's ``inputs`` takes a second argument, the shape (``inputs(seed, shape)``)."""
    import inspect

    try:
        params = list(inspect.signature(make).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


def _quiet() -> None:
    """No trace or profile function of the workload's runs while the judge reads outputs (a hook there could
    finish a lazy result on the judge's time)."""
    sys.settrace(None)
    sys.setprofile(None)


def _sentinels(torch) -> Any:
    """-> a function naming what the workload left active that could change what the judge reads (a torch
    function mode, a dispatch mode), or ''. Bound before the tree loads."""
    function_mode = getattr(torch._C, "_is_torch_function_mode_enabled", None)
    dispatch_depth = getattr(torch._C, "_len_torch_dispatch_stack", None)

    def active() -> str:
        if dispatch_depth is not None and dispatch_depth() > 0:
            return "a torch dispatch mode (TorchDispatchMode)"
        if function_mode is not None and function_mode():
            return "a torch function mode (TorchFunctionMode)"
        return ""

    return active


def _seed(torch) -> None:
    """Seed ``random``, numpy and torch (every device) with 0, before the module code runs: inputs drawn
    without a seed are then the same on both sides."""
    import contextlib
    import random

    random.seed(0)
    torch.manual_seed(0)
    with contextlib.suppress(ImportError):
        import numpy

        numpy.random.seed(0)


if __name__ == "__main__":
    main(sys.argv[1:])
