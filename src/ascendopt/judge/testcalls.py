"""The frozen tests' own calls of the code under test, recorded at freeze and replayed at every gate.

The judge's differential check compares the working tree with the frozen commit on inputs its trusted maker
makes (``inputs(seed)``, the shape mix's buckets, hidden shapes). The frozen tests often call the code under test
on other inputs: a 1-D tensor, two elements, an edge value. A change can be right there only while a test calls
it (it looks at its caller, at pytest, at the stack) and wrong on the same input anywhere else; the test run sees
nothing. So freeze records what the tests passed, and the gate calls the same functions with the same arguments in
both workers, where no test is the caller, and compares what they return in the parent (``judge.evidence``).

Recording (freeze only; ``$ASCENDOPT_RECORD_CALLS`` names a folder): ``CallRecorder``, a pytest plugin registered
by ``judge.pytest_report`` in the frozen test run (and in each pytest-xdist worker), replaces by a wrapper each plain
function defined in a repository file outside the tests wherever the tests hold it once collected: in the globals of
every module of the tests' files (the test modules, conftests, helpers in their folders) and in the parameters of
parametrized tests (``parametrize("impl", [my_op])``). A call made with a file of the tests on the stack whose
arguments are data (tensors, numbers, strings, None, ``torch.dtype``, ``torch.device``, and tuples, lists and dicts
of them) is kept: its arguments copied before the call (a function may write its inputs), one call per distinct
argument values, at most ``PER_FUNCTION`` per function, ``MAX_CALLS`` and ``MAX_BYTES`` of tensor data in all; a call
that cannot be kept is listed with why. At the end of the session each process writes them as one payload
(``judge.payload``) into the folder.

Freeze (``freeze_entry``) keeps the calls of functions defined in the target code (the files the gate lets change;
a pinned file's function cannot differ between the sides), replays each in the baseline's worker and in a second
worker of the frozen commit, and drops the calls whose outputs do not repeat (randomness, time): they could not
tell a change from itself. The rest go into the contract (``test_calls``) as one base64 payload, with the
functions and the tests that made them. The gate (``judge.engine.differential``) replays them.

Not covered: a function the tests reach through a module attribute (``op.my_op``) or a method, and arguments that
are not data; freeze says how many calls it kept and names those of the target code it could not.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import sys
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# The tests' calls are kept up to a byte budget, not a small count: a call left out is a call a change may be wrong
# on only while a test makes it. The counts bound the contract's size where tests make many tiny calls.
PER_FUNCTION = 256  # calls kept per function: the first ones the tests make with distinct arguments (values too)
MAX_FRAMES = 64  # frames looked up the stack for one of the tests' files
MAX_BYTES = 4 << 20  # tensor bytes kept in all (the contract carries them)
MAX_CALLS = 1024  # calls kept in all
MAX_SKIPPED = 64  # calls listed as not kept (freeze names them)


# -- in the frozen test run (freeze) ---------------------------------------------------------------------------


class CallRecorder:
    """The pytest plugin that records the tests' calls of the repository's functions (module docstring)."""

    def __init__(self, root: str, folder: str):
        self.root = os.path.realpath(root)
        self.folder = folder
        self.test_files: set[str] = set()
        self.test_dirs: tuple[str, ...] = ()
        self.calls: list[dict[str, Any]] = []
        self.skipped: list[dict[str, str]] = []
        self.kinds: dict[str, set[str]] = {}
        self.wrappers: dict[tuple[int, bool], Any] = {}
        self.bytes = 0
        self.current = ""

    def _is_target(self, fn: Any) -> bool:
        """A function of the repository that is not a test's own: defined in a repository file other than a test
        module or a conftest (a helper of the tests' folders too: freeze keeps only the target code's calls), seen
        through any decorator that names what it wraps (``functools.wraps``: ``torch.no_grad()``, caches)."""
        inner = _unwrapped(fn)
        if inner is None or "." in inner.__qualname__:
            return False
        path = os.path.realpath(inner.__code__.co_filename)
        return path.startswith(self.root + os.sep) and not self._test_module(path)

    def _test_module(self, path: str) -> bool:
        """A collected test module or a conftest (a package may keep its tests beside its code)."""
        name = os.path.basename(path)
        return (path in self.test_files or name == "conftest.py" or name.startswith("test_")
                or name.endswith("_test.py"))

    def _test_side(self, path: str) -> bool:
        """A file of the tests: a test module, a conftest, or any file in a test module's folder (a helper the tests
        share): where the references the tests hold are wrapped, and where a call is the tests'."""
        return self._test_module(path) or path.startswith(self.test_dirs)

    def pytest_collection_finish(self, session) -> None:
        modules = {id(m): m for m in (getattr(item, "module", None) for item in session.items) if m is not None}
        self.test_files = {os.path.realpath(m.__file__) for m in modules.values() if getattr(m, "__file__", None)}
        # a test module's folder holds the tests' helpers, unless it is the repository's root (the code under test)
        self.test_dirs = tuple(sorted({os.path.dirname(f) + os.sep for f in self.test_files} - {self.root + os.sep}))
        # the test modules, and every other module of the tests' folders (helpers, conftests): their references
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            if isinstance(path, str) and self._test_side(os.path.realpath(path)):
                for name, value in list(vars(module).items()):
                    if self._is_target(value):
                        setattr(module, name, self._wrap(value))
        # the repository's own modules too (``import op`` then ``op.my_op(x)`` in a test): a call through them is the
        # tests' only when a file of the tests makes it (the code's calls of its own functions are not recorded)
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            if not isinstance(path, str):
                continue
            path = os.path.realpath(path)
            if path.startswith(self.root + os.sep) and not self._test_side(path):
                for name, value in list(vars(module).items()):
                    inner = _unwrapped(value)
                    if self._is_target(value) and inner is not None and inner.__module__ == module.__name__:
                        setattr(module, name, self._wrap(value, direct=True))
        # function objects captured at collection: ``parametrize("impl", [my_op])``
        for item in session.items:
            params = getattr(getattr(item, "callspec", None), "params", None)
            if isinstance(params, dict):
                for name, value in list(params.items()):
                    if self._is_target(value):
                        params[name] = self._wrap(value)

    def pytest_runtest_setup(self, item) -> None:
        self.current = item.nodeid

    def _wrap(self, fn: Any, direct: bool = False):
        """The recording wrapper of ``fn``: a call is kept when a file of the tests is on the stack (``direct``: when
        one is the caller, for the wrapper a module of the code under test holds)."""
        if (id(fn), direct) in self.wrappers:
            return self.wrappers[id(fn), direct]
        inner = _unwrapped(fn)
        key = f"{inner.__module__}:{inner.__qualname__}"
        path = os.path.relpath(os.path.realpath(inner.__code__.co_filename), self.root)

        @functools.wraps(fn)
        def recorded(*args, **kwargs):
            if self._called_by_a_test() if direct else self._from_a_test():
                try:
                    self._keep(key, path, args, kwargs)
                except Exception:  # noqa: BLE001 - a call that cannot be copied is not recorded; the test goes on
                    pass
            return fn(*args, **kwargs)

        self.wrappers[id(fn), direct] = recorded
        return recorded

    def _called_by_a_test(self) -> bool:
        """Whether the caller of the wrapper is a file of the tests."""
        frame = sys._getframe(2)
        return frame is not None and self._test_side(os.path.realpath(frame.f_code.co_filename))

    def _from_a_test(self) -> bool:
        """Whether a frame of the tests' files is on the stack (the call made by a test, or by a helper it called)."""
        frame = sys._getframe(2)
        for _ in range(MAX_FRAMES):
            if frame is None:
                return False
            if self._test_side(os.path.realpath(frame.f_code.co_filename)):
                return True
            frame = frame.f_back
        return False

    def _keep(self, key: str, path: str, args: tuple, kwargs: dict) -> None:
        kinds = self.kinds.setdefault(key, set())
        if len(kinds) >= PER_FUNCTION or len(self.calls) >= MAX_CALLS:
            if len(self.skipped) < MAX_SKIPPED:  # named, so freeze says what the replay leaves out
                limit = f"{PER_FUNCTION} calls per function" if len(kinds) >= PER_FUNCTION else f"{MAX_CALLS} calls"
                entry = {"function": key, "file": path, "test": self.current,
                         "why": f"past the {limit} the contract keeps"}
                if entry not in self.skipped:
                    self.skipped.append(entry)
            return
        try:
            _, nbytes = _signature((args, kwargs), digest=False)  # sizes first: a large call is never copied
        except _NotData as why:
            if len(self.skipped) < MAX_SKIPPED:
                self.skipped.append({"function": key, "file": path, "test": self.current, "why": str(why)})
            return
        if self.bytes + nbytes > MAX_BYTES:
            if len(self.skipped) < MAX_SKIPPED:
                self.skipped.append({"function": key, "file": path, "test": self.current,
                                     "why": f"its arguments pass the {MAX_BYTES >> 20} MiB the contract keeps"})
            return
        kind, _ = _signature((args, kwargs))
        if kind in kinds:
            return
        kinds.add(kind)
        self.bytes += nbytes
        self.calls.append({"function": key, "file": path, "test": self.current,
                           "args": _copy(tuple(args)), "kwargs": _copy(dict(kwargs))})

    def pytest_sessionfinish(self, session) -> None:
        if not self.calls and not self.skipped:
            return
        import torch

        from ascendopt.judge.payload import RawReader, encode

        blob = encode({"calls": self.calls, "skipped": self.skipped}, RawReader(torch))
        with open(os.path.join(self.folder, f"calls-{os.getpid()}.bin"), "wb") as fh:
            fh.write(blob)


def _unwrapped(fn: Any) -> types.FunctionType | None:
    """The plain function ``fn`` is, or wraps through ``__wrapped__`` (``functools.wraps``); None if neither."""
    for _ in range(8):
        if isinstance(fn, types.FunctionType) and not hasattr(fn, "__wrapped__"):
            return fn
        inner = getattr(fn, "__wrapped__", None)
        if inner is None:
            return fn if isinstance(fn, types.FunctionType) else None
        fn = inner
    return None


class _NotData(Exception):
    """An argument that is not data; the message says what it is."""


def _signature(value: Any, depth: int = 0, digest: bool = True) -> tuple[str, int]:
    """A digest of ``value``: its structure, each tensor's shape, dtype, device and (``digest``) bytes, and its
    scalars (two calls with the same digest test the same thing), and its tensor bytes; ``_NotData`` for anything
    that is not data."""
    import torch

    if depth > 6:
        raise _NotData("nested deeper than 6")
    if type(value) is torch.Tensor:
        if value.layout != torch.strided or value.is_meta:
            raise _NotData(f"a {value.layout} tensor")
        nbytes = value.numel() * value.element_size()
        # the layout and requires_grad too: a call on a transposed view, or on a leaf that requires grad, is its own
        layout = "" if value.is_contiguous() else f"s{tuple(value.stride())}"
        kind = f"T{tuple(value.shape)}{value.dtype}{value.device.type}{layout}{'g' if value.requires_grad else ''}"
        if not digest:
            return kind, nbytes
        raw = value.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()
        return f"{kind}:{hashlib.sha256(raw).hexdigest()[:16]}", nbytes
    if value is None or type(value) in (bool, int, float, str) or isinstance(value, (torch.dtype, torch.device)):
        return repr(value), 0
    if type(value) in (tuple, list):
        inner = [_signature(v, depth + 1, digest) for v in value]
        return f"{type(value).__name__}({','.join(s for s, _ in inner)})", sum(n for _, n in inner)
    if type(value) is dict and all(type(k) is str for k in value):
        inner = [(k, _signature(v, depth + 1, digest)) for k, v in value.items()]
        return "{" + ",".join(f"{k}={s}" for k, (s, _) in inner) + "}", sum(n for _, (_, n) in inner)
    raise _NotData(f"a {type(value).__module__}.{type(value).__qualname__} argument is not data")


def _copy(value: Any) -> Any:
    import torch

    if type(value) is torch.Tensor:
        kept = value.detach().clone()  # the same layout (clone preserves a dense view's strides)
        return kept.requires_grad_(True) if value.requires_grad and kept.is_floating_point() else kept
    if type(value) in (tuple, list):
        return type(value)(_copy(v) for v in value)
    if type(value) is dict:
        return {k: _copy(v) for k, v in value.items()}
    return value


# -- in the judge (freeze, gate) ------------------------------------------------------------------------------


def recorded(folder: Path) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """The calls the frozen test run's processes wrote into ``folder`` (decoded here: no pickle, nothing run), and
    the calls they could not record (``{"function", "test", "why"}``)."""
    from ascendopt.judge.payload import decode

    calls: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    for path in sorted(Path(folder).glob("calls-*.bin")):
        value = decode(path.read_bytes(), grad=True)  # as the tests passed them: a leaf that required grad does
        calls += [c for c in value.get("calls", []) if isinstance(c, dict) and isinstance(c.get("function"), str)]
        skipped += [{k: str(v) for k, v in c.items()} for c in value.get("skipped", []) if isinstance(c, dict)]
    return calls, skipped


def function_name(key: str) -> tuple[str, str]:
    """``"module:qualname"`` -> ``(module, qualname)``."""
    module, _, name = key.partition(":")
    return module, name


def groups(calls: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """The calls by function (``"module:qualname"``), in the order the tests made them."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for call in calls:
        out.setdefault(str(call["function"]), []).append(call)
    return out


def input_sets(calls: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    """The calls as the worker's input sets for one function: ``[args, kwargs]`` each."""
    return [[list(c["args"]), dict(c["kwargs"])] for c in calls]


def arguments(args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The tensors of one call's arguments by name (``argument 1``, ``argument 2[0]``, ``argument scale``): what an
    in-place write is checked on."""
    import torch

    from ascendopt.judge.evidence import parts

    found: dict[str, Any] = {}
    for i, value in enumerate(args):
        found.update(parts(value, f"argument {i + 1}"))
    for name, value in kwargs.items():
        found.update(parts(value, f"argument {name}"))
    return {name: value.detach() for name, value in found.items() if isinstance(value, torch.Tensor)}


def written(call: Mapping[str, Any], after: Sequence[Any]) -> dict[str, str]:
    """``{argument: message}`` for each tensor argument of ``call`` (as recorded) that ``after`` (its ``[args,
    kwargs]`` handed back by a worker after the call) holds changed, or no longer holds as a plain tensor."""
    from ascendopt.judge.equivalence import input_writes

    before, now = arguments(call["args"], call["kwargs"]), arguments(*after)
    changed = input_writes({n: t for n, t in before.items() if n in now}, now)
    changed.update({n: f"{n}: not handed back as a plain tensor after the call" for n in before if n not in now})
    return changed


def encode_calls(calls: Sequence[Mapping[str, Any]]) -> str:
    """The calls as one base64 payload (the contract's ``test_calls.payload``)."""
    import torch

    from ascendopt.judge.payload import RawReader, encode

    kept = [{"function": c["function"], "file": c["file"], "test": c["test"], "args": tuple(c["args"]),
             "kwargs": dict(c["kwargs"])} for c in calls]
    return base64.b64encode(encode(kept, RawReader(torch))).decode("ascii")


def decode_calls(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The calls of a contract's ``test_calls`` entry; ``ValueError`` when its payload does not match its digest."""
    from ascendopt.judge.payload import decode

    blob = base64.b64decode(entry["payload"])
    if hashlib.sha256(blob).hexdigest() != entry["sha256"]:
        raise ValueError("test_calls.payload does not match test_calls.sha256")
    return [dict(c) for c in decode(blob, grad=True)]  # replayed as recorded: a leaf that required grad does


def freeze_entry(session, found: tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, str]]],
                 targets: Sequence[str], limit_s: float, tolerances: Mapping[str, Mapping[str, float]]
                 ) -> tuple[dict[str, Any] | None, list[str]]:
    """The contract's ``test_calls`` entry from what the test run recorded (``recorded``: the calls, and those it
    could not record): the calls of functions defined in ``targets`` (files or folders relative to the repository),
    replayed in the ``baseline`` and ``repeat`` workers of ``session`` and kept where both agree within
    ``tolerances`` (stored with them: the gate compares the sides within the same). Returns the entry (None when no
    call is kept) and a line per call of the target code not replayed, saying why."""
    calls, skipped = found
    from ascendopt.judge.evidence import compare_values
    from ascendopt.judge.interleave import FAILURES

    def targeted(path: str) -> bool:
        return any(path == t or path.startswith(t.rstrip("/") + "/") for t in targets)

    kept: list[Mapping[str, Any]] = []
    dropped = [f"{c['function']} (from {c['test']}): {c['why']}" for c in skipped if targeted(c.get("file", ""))]
    for key, group in groups([c for c in calls if targeted(str(c.get("file", "")))]).items():
        try:
            first = replay(session.worker("baseline"), key, group, limit_s)
            second = replay(session.worker("repeat"), key, group, limit_s) if "repeat" in session.workers else first
        except FAILURES as exc:
            dropped.append(f"{key}: the frozen commit fails on the tests' arguments outside the tests ({exc})")
            continue
        for call, a, b in zip(group, first["outputs"], second["outputs"], strict=True):
            if all(c.passed for c in compare_values(a, b, tolerances)):
                kept.append(call)
            else:
                dropped.append(f"{key} (from {call['test']}): its outputs do not repeat")
    if not kept:
        return None, dropped
    payload = encode_calls(kept)
    entry = {"sha256": hashlib.sha256(base64.b64decode(payload)).hexdigest(),
             "functions": {key: len(group) for key, group in groups(kept).items()},
             "tests": sorted({str(c["test"]) for c in kept}),
             "tolerances": {k: dict(v) for k, v in tolerances.items()}, "payload": payload}
    return entry, dropped


def replay(child, key: str, calls: Sequence[Mapping[str, Any]], limit_s: float) -> dict[str, Any]:
    """``calls`` of the function ``key`` made in the worker ``child`` (``interleave._Child.call``) -> decoded
    ``{"outputs", "inputs"}``."""
    import torch

    from ascendopt.judge.payload import RawReader, encode

    return child.call(encode(input_sets(calls), RawReader(torch)), limit_s, function=key)
