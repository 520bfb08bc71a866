"""A pytest plugin for the frozen test run: every test's outcome by node id, the failing tests' own
error lines, what the run used, and whether the comparison functions stayed the originals, written as
authenticated JSON to the file named by ``$ASCENDOPT_PYTEST_REPORT`` when the session ends.

Freeze records which tests passed on the baseline and the gate requires each of them to pass again,
so a test that is skipped, deselected, xfailed or gone is seen even when pytest exits 0. Outcomes:
``passed``, ``failed``, ``error`` (setup, teardown or collection), ``skipped``, ``xfailed``,
``xpassed``; deselected node ids are listed apart. ``ascendopt.judge.testset`` starts the run (through
``ascendopt.judge.pytest_launch``, which imports this module before any file of the repository can be
imported) and reads the file. This module runs inside the user's pytest process: of ascendopt it imports
only ``ascendopt.judge.sources`` (standard library only), and only in a pytest-xdist worker; and at freeze,
when ``$ASCENDOPT_RECORD_CALLS`` names a folder, ``ascendopt.judge.testcalls``, whose plugin records the tests'
own calls of the repository's functions there.

What the run used (``used``, absolute paths): ``modules``, every imported module's file (from
``sys.modules`` and from the import system's reads of source and cached byte code, seen by an audit
hook on ``open``, so a module removed from ``sys.modules`` is still seen); ``opened``, every regular
file opened for reading and never for writing (data, expected outputs); ``conftests``, every conftest
module pytest registered; ``inifile``, the configuration file pytest read (or null). The parent keeps
what lies in the repository, and the conftests and configuration file wherever they are.

Runner (``runner``): the files pytest, _pytest, pluggy and this plugin were imported from; the parent
requires them outside the repository.

Comparisons (``comparisons``): at import (before any conftest or test module runs; torch's when torch
is first imported, as its module code ends) every comparison function a test relies on is bound with
its ``__code__`` (``COMPARISONS``: torch's and numpy's testing
and closeness functions, ``math.isclose``, ``pytest.approx`` and its ``__eq__``, unittest's asserts);
at session end each one that is no longer the same object, or whose code object was swapped, is listed
in ``replaced``.

Loader (``loader``): the launcher makes the repository's files load from their source, never from
cached byte code (``ascendopt.judge.sources``, bound here at import; a pytest-xdist worker installs it here,
for the folder ``$ASCENDOPT_SOURCE_ROOT``, the one module of ascendopt this plugin imports, stdlib-only);
``replaced`` names its functions that the run undid; ``loaded`` maps each file it compiled (real path) to
the sha256 of the bytes compiled; ``read`` maps each other file of the repository the run opened for reading
(up to ``MAX_HASHED_BYTES``, and any larger file listed in ``$ASCENDOPT_HASH_ALSO``: the parent lists the pinned
ones) to the sha256 of every content it had when opened.

Authentication: the parent passes a per-run key through an inherited pipe whose file descriptor is
``$ASCENDOPT_REPORT_FD``; this module reads the key and closes the pipe at import, so no conftest or
test can read it from the environment or the pipe, and the report carries an HMAC-SHA256 of its
payload under that key. A report written by anything else (a conftest, a test that writes "passed"
and ``os._exit(0)``s, a shadowing ``pytest``) does not verify.

File format::

    {"payload": "<JSON text>", "mac": "<hex HMAC-SHA256 of the payload text under the key>"}

payload (``version`` 2)::

    {"version": 2, "exitstatus": 0, "collected": [nodeid, ...], "deselected": [nodeid, ...],
     "outcomes": {nodeid: outcome}, "details": {nodeid: {"where": "path:line", "lines": [...]}},
     "used": {"modules": [...], "opened": [...], "conftests": [...], "inifile": path or null},
     "runner": {"pytest": path, ...}, "comparisons": {"checked": N, "replaced": [name, ...]},
     "loader": {"replaced": [name, ...], "loaded": {path: sha256}, "read": {path: [sha256, ...]}}}

``where``: the crash location (a skip: the skip's); ``lines``: the ``E`` lines of a failure's
traceback (else its crash message), a skip's reason.

PYTEST_DONT_REWRITE: the launcher imports this module before pytest registers it (pytest would warn
that it cannot rewrite its asserts; it has none to rewrite).
"""

from __future__ import annotations

import hashlib
import hmac
import importlib
import importlib.util
import inspect
import json
import os
import sys
import threading

REPORT_ENV = "ASCENDOPT_PYTEST_REPORT"
KEY_FD_ENV = "ASCENDOPT_REPORT_FD"  # the read end of the pipe that carries the per-run key
SOURCE_ROOT_ENV = "ASCENDOPT_SOURCE_ROOT"  # the repository whose files load from source (ascendopt.judge.sources)
# freeze only: the folder the run writes the tests' own calls of the repository's functions into (judge.testcalls)
RECORD_CALLS_ENV = "ASCENDOPT_RECORD_CALLS"
VERSION = 2
MAX_LINES = 12  # error lines kept per test: the first ``E`` lines of its traceback
MAX_HASHED_BYTES = 64 << 20  # data files up to this size are hashed as the tests open them
HASH_ALSO_ENV = "ASCENDOPT_HASH_ALSO"  # os.pathsep-separated real paths hashed whatever their size
# The comparison functions tests rely on, as "module:attribute.path"; those of a module that is not
# installed are left out. Python functions are compared by identity and code object, builtins by identity.
COMPARISONS = (
    "math:isclose",
    "torch:allclose", "torch:isclose", "torch:equal", "torch:testing.assert_close",
    "torch:Tensor.allclose", "torch:Tensor.isclose", "torch:Tensor.equal",
    "torch.testing._comparison:assert_close",
    "numpy:allclose", "numpy:isclose", "numpy:array_equal", "numpy:array_equiv",
    "pytest:approx",
    # pytest's own runner, which turns a test's call into its outcome (looked up at each test: a patched
    # ``Function.runtest`` that swallows an AssertionError makes a failing test pass without any comparison
    # replaced)
    "_pytest.python:Function.runtest", "_pytest.runner:call_and_report", "_pytest.runner:CallInfo.from_call",
    "_pytest.runner:runtestprotocol", "_pytest.runner:check_interactive_exception",
    "_pytest.reports:TestReport.from_item_and_call",
)
# Bound when first imported (``_BindOnImport``), not up front: importing torch would slow every run.
LAZY = ("torch",)
# Whole families: every public assert function of numpy.testing, every assert method of unittest's
# TestCase, and the comparison methods of each of pytest.approx's classes.
_FAMILIES = ("numpy.testing", "unittest", "pytest")


def _read_key() -> bytes | None:
    """The run's key from the inherited pipe (the parent wrote it and closed its end), which is then
    closed; the descriptor's number leaves the environment. None when not run by ascendopt."""
    fd = os.environ.pop(KEY_FD_ENV, None)
    if fd is None or not fd.isdigit():
        return None
    try:
        chunks = []
        while True:
            chunk = os.read(int(fd), 4096)
            if not chunk:
                break
            chunks.append(chunk)
        os.close(int(fd))
    except OSError:
        return None
    return b"".join(chunks) or None


def _originals(only: str | None = None) -> dict[str, tuple[object, object]]:
    """name -> (the object, its ``__code__`` or None) of every comparison function importable now, those
    of a ``LAZY`` package only once it is imported; ``only``: those of that top-level package alone."""
    bound: dict[str, tuple[object, object]] = {}

    def wanted(module_name: str) -> bool:
        top = module_name.split(".")[0]
        if only is not None:
            return top == only
        return (top not in LAZY or top in sys.modules) and importlib.util.find_spec(top) is not None

    def bind(name: str, obj: object) -> None:
        if callable(obj):
            obj = _unbound(obj)
            bound[name] = (obj, getattr(obj, "__code__", None))

    for spec in COMPARISONS:
        module_name, attr = spec.split(":")
        if not wanted(module_name):
            continue
        try:
            obj: object = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            continue
        bind(f"{module_name}.{attr}", obj)
    for family in _FAMILIES:
        if not wanted(family):
            continue
        try:
            module = importlib.import_module(family)
        except ImportError:
            continue
        if family == "pytest":  # pytest.approx's module (_pytest.python_api, _pytest.approx in pytest 9)
            module = importlib.import_module(module.approx.__module__)
            family = module.__name__
            bind(f"{family}.approx", module.approx)
        if family == "numpy.testing":
            for name in dir(module):
                if name.startswith("assert_"):
                    bind(f"{family}.{name}", getattr(module, name))
        elif family == "unittest":
            for name in dir(module.TestCase):
                if name.startswith("assert") or name == "fail":
                    bind(f"unittest.TestCase.{name}", getattr(module.TestCase, name))
        else:  # pytest.approx's classes: what `actual == approx(expected)` calls, inherited or their own
            for cls_name in dir(module):
                cls = getattr(module, cls_name)
                if isinstance(cls, type) and cls_name.startswith("Approx"):
                    for method in ("__eq__", "__ne__"):
                        bind(f"{family}.{cls_name}.{method}", getattr(cls, method))
    return bound


class _BindingLoader:
    """The loader of a ``LAZY`` package, which binds its comparison functions as soon as its module code
    has run: before the code that imported it gets the module."""

    def __init__(self, loader, name: str):
        self._loader, self._name = loader, name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        _ORIGINALS.update(_originals(only=self._name))

    def __getattr__(self, attr: str):
        return getattr(self._loader, attr)


class _BindOnImport:
    """A ``sys.meta_path`` finder that gives each ``LAZY`` package, on its first import, a ``_BindingLoader``."""

    def __init__(self, names):
        self.waiting = set(names)

    def find_spec(self, name, path=None, target=None):
        if name not in self.waiting:
            return None
        self.waiting.discard(name)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None) if finder is not self else None
            spec = find(name, path, target) if find else None
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _BindingLoader(spec.loader, name)
        return spec


def unbound_packages(originals: dict[str, tuple[object, object]]) -> list[str]:
    """``LAZY`` packages imported during the run whose comparison functions were never bound (the
    binding finder was taken out of the way): their functions cannot be vouched for."""
    return [f"{top} (imported, but its comparison functions were not bound at import)" for top in LAZY
            if top in sys.modules and not any(name.startswith(top + ".") for name in originals)]


def _current(name: str) -> object:
    """The object ``name`` (as ``_originals`` names it) refers to now, or None when it is gone."""
    parts = name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:i]))
        if module is None:
            continue
        obj: object = module
        try:
            for part in parts[i:]:
                obj = getattr(obj, part)
        except AttributeError:
            return None
        return obj
    return None


def _unbound(obj: object) -> object:
    """A class method's function (each attribute lookup makes a new bound method); anything else as it is."""
    return getattr(obj, "__func__", obj) if inspect.ismethod(obj) else obj


def replaced_comparisons(originals: dict[str, tuple[object, object]]) -> list[str]:
    """The names of the comparison functions that are no longer the object (or the code) bound at start."""
    replaced = []
    for name, (obj, code) in originals.items():
        now = _unbound(_current(name))
        if now is not obj or getattr(now, "__code__", None) is not code:
            replaced.append(name)
    return replaced


class _Usage:
    """Files the process reads, seen by an audit hook (hooks cannot be removed once added): regular files
    opened for reading, files opened for writing (left out: the run's outputs), and cached byte code of
    imported modules (mapped back to their source)."""

    def __init__(self, root: str | None = None, also: str | None = None):
        self.active = False  # from the loading of the first conftest on: pytest's own search for its
        # configuration files (it reads every candidate on the way up) is not the tests' reading
        self.read: set[str] = set()
        self.written: set[str] = set()
        # data files of the repository ``root`` read: real path -> sha256 of each content read (its modules'
        # digests come from ascendopt.judge.sources, which compiles them)
        self.root = None if root is None else os.path.realpath(root) + os.sep
        self.digests: dict[str, list[str]] = {}
        # larger than MAX_HASHED_BYTES and hashed all the same (the pinned ones: a pin does not end at a size)
        self.also = frozenset(p for p in (also or "").split(os.pathsep) if p)
        # real path -> (stat identity, sha256) of its last digest: a file opened again unchanged is not re-read.
        # The identity holds the status-change time, which any write or utime() moves and no user can set back.
        self._last: dict[str, tuple[tuple[int, ...], str]] = {}
        self._hashing: set[int] = set()  # threads reading a file for its digest (their own opens are ours)

    def hook(self, event: str, args: tuple) -> None:
        if (event != "open" or not self.active or not args or not isinstance(args[0], (str, bytes))
                or threading.get_ident() in self._hashing):
            return
        path, mode = args[0], args[1] if len(args) > 1 else "r"
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool(
            flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_APPEND", 0)))
        (self.written if writing else self.read).add(path)
        if not writing and self.root is not None:
            self._digest(path)

    def _digest(self, path: str) -> None:
        """The content of a repository data file as it is about to be read (a file changed only while the
        tests read it is then seen)."""
        full = os.path.realpath(os.path.abspath(path))
        if not full.startswith(self.root) or full.endswith((".py", ".pyc")) or not os.path.isfile(full):
            return
        self._hashing.add(threading.get_ident())  # reading it here raises this event again
        try:
            with open(full, "rb") as fh:
                st = os.fstat(fh.fileno())
                if st.st_size > MAX_HASHED_BYTES and full not in self.also:
                    return
                identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
                last = self._last.get(full)
                if last is not None and last[0] == identity:
                    digest = last[1]
                else:
                    digest = hashlib.sha256()
                    while chunk := fh.read(1 << 24):
                        digest.update(chunk)
                    digest = digest.hexdigest()
                    self._last[full] = (identity, digest)
        except OSError:
            return
        finally:
            self._hashing.discard(threading.get_ident())
        seen = self.digests.setdefault(full, [])
        if digest not in seen:
            seen.append(digest)

    def files(self) -> tuple[list[str], list[str]]:
        """(module source files read through byte code or source, other files read): absolute paths."""
        modules, opened = set(), set()
        for path in self.read - self.written:
            full = os.path.abspath(path)
            if "__pycache__" in full.split(os.sep) and full.endswith(".pyc"):
                try:
                    modules.add(importlib.util.source_from_cache(full))
                except ValueError:
                    pass
            elif os.path.isfile(full):
                opened.add(full)
        return sorted(modules), sorted(opened)


def _module_files() -> set[str]:
    files = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and os.path.isfile(path):  # some carry a made-up __file__
            files.add(os.path.abspath(path))
    return files


def _detail(report) -> dict[str, object]:
    """Where the test stopped and its own error lines: the crash message and the ``E`` lines of the
    traceback (what pytest marks as the error); for a skip, its reason."""
    longrepr = report.longrepr
    if report.skipped:
        if isinstance(longrepr, tuple) and len(longrepr) == 3:  # (path, line, "Skipped: reason")
            return {"where": f"{longrepr[0]}:{longrepr[1]}", "lines": [str(longrepr[2])]}
        return {"where": "", "lines": [f"xfail: {report.wasxfail}"] if getattr(report, "wasxfail", "") else []}
    crash = getattr(longrepr, "reprcrash", None)
    where, lines = "", []
    if crash is not None:
        path = os.path.relpath(crash.path) if os.path.isabs(crash.path) else crash.path
        where = f"{path}:{crash.lineno}"
        lines = [(crash.message or "").strip().splitlines()[0]] if (crash.message or "").strip() else []
    text = getattr(report, "longreprtext", "") or ""
    marked = [ln.rstrip() for ln in text.splitlines() if ln.startswith("E ") and ln[1:].strip()]
    if marked:
        lines = marked
    elif not lines:  # no traceback (a collection error as text, an internal error): its last lines
        lines = [ln.rstrip() for ln in text.strip().splitlines()[-4:] if ln.strip()]
    return {"where": where, "lines": lines[:MAX_LINES]}


def _sealer(key: bytes):
    """A function that writes ``data`` with its HMAC to a path; the key lives only in its closure."""

    def seal(path: str, data: dict) -> None:
        payload = json.dumps(data)
        mac = hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"payload": payload, "mac": mac}, fh)

    return seal


class _Recorder:
    def __init__(self, path: str, seal, usage: _Usage, originals: dict[str, tuple[object, object]]):
        self.path = path
        self._seal = seal
        self._usage = usage
        self._originals = originals
        self.collected: list[str] = []
        self.deselected: list[str] = []
        self.outcomes: dict[str, str] = {}
        self.details: dict[str, dict[str, object]] = {}
        self.conftests: set[str] = set()
        self.modules: set[str] = set()
        self.replaced: set[str] = set()
        self.worker_opened: set[str] = set()
        self.loader_replaced: set[str] = set()
        self.loader_loaded: dict[str, str] = {}
        self.worker_read: dict[str, list[str]] = {}
        self.late_plugins: set[str] = set()  # plugins registered once the tests were collected
        self.collection_done = False

    def _record(self, nodeid: str, outcome: str, report) -> None:
        # The first outcome that is not a pass wins (a teardown error after a passed call is an error).
        if self.outcomes.get(nodeid) in (None, "passed", "xpassed"):
            self.outcomes[nodeid] = outcome
            if outcome not in ("passed", "xpassed"):
                self.details[nodeid] = _detail(report)

    def pytest_plugin_registered(self, plugin) -> None:
        path = getattr(plugin, "__file__", None)
        if isinstance(path, str) and os.path.basename(path) == "conftest.py":
            self.conftests.add(os.path.abspath(path))
        if self.collection_done:  # after collection: registered by code the tests ran, not by pytest
            kind = type(plugin)
            self.late_plugins.add(getattr(plugin, "__name__", None) or f"{kind.__module__}.{kind.__qualname__}")

    def pytest_collection_finish(self, session) -> None:
        self.collected = [item.nodeid for item in session.items]
        self.collection_done = True

    def pytest_deselected(self, items) -> None:
        self.deselected += [item.nodeid for item in items]

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self._record(report.nodeid or "<collection>", "error", report)

    def pytest_runtest_logreport(self, report) -> None:
        xfail = hasattr(report, "wasxfail")
        if report.when == "call":
            if report.passed:
                outcome = "xpassed" if xfail else "passed"
            elif report.skipped:
                outcome = "xfailed" if xfail else "skipped"
            else:
                outcome = "failed"
        elif report.failed:
            outcome = "error"
        elif report.skipped:  # skipped in setup: a skip or skipif mark, pytest.skip() in a fixture
            outcome = "xfailed" if xfail else "skipped"
        else:
            return  # a clean setup or teardown says nothing about the test
        self._record(report.nodeid, outcome, report)

    def worker_down(self, node) -> None:
        """pytest-xdist: what a worker process used and found replaced (``_Worker``), from its ``node``."""
        seen = getattr(node, "workeroutput", {}).get("ascendopt", {})
        self.modules.update(seen.get("modules", []))
        self.conftests.update(seen.get("conftests", []))
        self.replaced.update(seen.get("replaced", []))
        self.worker_opened.update(seen.get("opened", []))
        self.loader_replaced.update(seen.get("loader_replaced", []))
        self.worker_read = _merged(self.worker_read, seen.get("read") or {})
        for path, digest in (seen.get("loader_loaded") or {}).items():
            if self.loader_loaded.get(path, digest) != digest:  # two workers compiled two versions
                self.loader_replaced.add(f"{path} (compiled in two versions by pytest-xdist workers)")
            self.loader_loaded[path] = digest

    def pytest_sessionfinish(self, session, exitstatus) -> None:
        modules, opened = self._usage.files()
        replaced = sorted(self.replaced | set(replaced_comparisons(self._originals))
                          | set(unbound_packages(self._originals)))
        ini = getattr(session.config, "inipath", None)
        data = {"version": VERSION, "exitstatus": int(exitstatus), "collected": self.collected,
                "deselected": self.deselected, "outcomes": self.outcomes, "details": self.details,
                "used": {"modules": sorted(self.modules | set(modules) | _module_files()),
                         "opened": sorted(set(opened) | self.worker_opened),
                         "conftests": sorted(self.conftests), "inifile": str(ini) if ini else None},
                "runner": runner_files(),
                "comparisons": {"checked": len(self._originals), "replaced": replaced},
                "plugins": {"late": sorted(self.late_plugins), "entry_points": entry_point_plugins(session.config)},
                "loader": {"replaced": sorted(self.loader_replaced | set(_loader_replaced())),
                           "loaded": {**self.loader_loaded, **_loader_loaded()},
                           "read": _merged(self.worker_read, self._usage.digests)}}
        self._seal(self.path, data)


def entry_point_plugins(config) -> list[str]:
    """The names of the installed pytest plugins (entry points of group ``pytest11``) registered in this run:
    what autoload found at freeze, and the only ones a gate loads (``-p NAME`` with autoload off)."""
    from importlib.metadata import entry_points

    return sorted({ep.name for ep in entry_points(group="pytest11") if config.pluginmanager.get_plugin(ep.name)})


def runner_files() -> dict[str, str | None]:
    """Where pytest, _pytest, pluggy and this plugin were imported from."""
    return {name: getattr(sys.modules.get(name), "__file__", None)
            for name in ("pytest", "_pytest", "pluggy", __name__)}


def _loader_replaced() -> list[str]:
    """The launcher's source-only import functions (``ascendopt.judge.sources``) that were undone."""
    return _SOURCES.replaced() if _SOURCES is not None else []


def _merged(*maps: dict[str, list[str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for one in maps:
        for path, digests in one.items():
            out.setdefault(path, [])
            out[path] += [d for d in digests if d not in out[path]]
    return out


def _loader_loaded() -> dict[str, str]:
    """The repository's files compiled from source in this process: real path -> sha256 of the bytes."""
    return _SOURCES.loaded() if _SOURCES is not None else {}


# -- at import: before any conftest, test module or file of the repository is loaded ----------------

_KEY = _read_key()
_USAGE = _Usage(os.environ.get(SOURCE_ROOT_ENV) or None, os.environ.get(HASH_ALSO_ENV))
_ORIGINALS: dict[str, tuple[object, object]] = {}
# bound now: the launcher installed it before importing this module; a pytest-xdist worker installs it here,
# before its conftests and tests are imported (None when pytest was started otherwise)
_SOURCES = sys.modules.get("ascendopt.judge.sources")
if _SOURCES is None and os.environ.get(SOURCE_ROOT_ENV):
    _SOURCES = importlib.import_module("ascendopt.judge.sources")
    _SOURCES.load_from_source([os.environ[SOURCE_ROOT_ENV]])
if REPORT_ENV in os.environ:  # a run started by ascendopt (its pytest-xdist workers inherit the variable)
    sys.addaudithook(_USAGE.hook)
    _ORIGINALS.update(_originals())
    sys.meta_path.insert(0, _BindOnImport(top for top in LAZY if top not in sys.modules))


def pytest_load_initial_conftests(early_config) -> None:
    # pytest's own implementation, which imports the conftests, is trylast: this one runs before it
    _USAGE.active = True


def pytest_configure(config) -> None:
    path = os.environ.get(REPORT_ENV)
    if not path:
        return
    calls, root = os.environ.get(RECORD_CALLS_ENV), os.environ.get(SOURCE_ROOT_ENV)
    if calls and root and not config.pluginmanager.has_plugin("ascendopt-calls"):
        from ascendopt.judge.testcalls import CallRecorder  # freeze only: it needs torch to copy the arguments

        config.pluginmanager.register(CallRecorder(root, calls), "ascendopt-calls")
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: its findings go to the controller
        if not config.pluginmanager.has_plugin("ascendopt-worker"):
            config.pluginmanager.register(_Worker(config), "ascendopt-worker")
    elif _KEY is not None and not config.pluginmanager.has_plugin("ascendopt-report"):
        recorder = _Recorder(path, _sealer(_KEY), _USAGE, _ORIGINALS)
        config.pluginmanager.register(recorder, "ascendopt-report")
        # pytest-xdist's controller hook exists only where xdist is installed and active: pytest stops with an
        # internal error on a plugin that implements a hook it does not know
        if hasattr(config.hook, "pytest_testnodedown"):
            config.pluginmanager.register(_XdistController(recorder), "ascendopt-xdist")


class _XdistController:
    """The pytest-xdist controller's hook, registered beside ``_Recorder`` only where xdist defines it."""

    def __init__(self, recorder: _Recorder):
        self.recorder = recorder

    def pytest_testnodedown(self, node, error) -> None:
        self.recorder.worker_down(node)


class _Worker:
    """In a pytest-xdist worker: the files it used and the comparisons replaced in it, handed to the
    controller through ``workeroutput`` (the controller alone writes the report)."""

    def __init__(self, config):
        self.config = config
        self.conftests: set[str] = set()

    def pytest_plugin_registered(self, plugin) -> None:
        path = getattr(plugin, "__file__", None)
        if isinstance(path, str) and os.path.basename(path) == "conftest.py":
            self.conftests.add(os.path.abspath(path))

    def pytest_sessionfinish(self, session) -> None:
        modules, opened = _USAGE.files()
        self.config.workeroutput["ascendopt"] = {
            "modules": sorted(set(modules) | _module_files()), "opened": opened,
            "conftests": sorted(self.conftests),
            "replaced": replaced_comparisons(_ORIGINALS) + unbound_packages(_ORIGINALS),
            "loader_replaced": _loader_replaced(), "loader_loaded": _loader_loaded(), "read": _USAGE.digests}
