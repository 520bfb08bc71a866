"""Child processes with a time limit: every program ascendopt starts (tests, workloads, git, ncu) runs here.

A child runs in its own session, so on expiry (or Ctrl-C) the whole process group is killed: a test
runner's workers or a workload's compiler processes go with it and nothing is left running. The
timeout names what ran and the limit, so the caller can say which stage hit it.

A process that leaves its group on purpose (a double fork with ``setsid``) is out of reach of a group
kill. While the judge runs, it is a child subreaper (``adopt_orphans``, Linux): such a process is
re-parented to the judge, stays in its process tree (``process_table``, ``descendants``) and is killed
and reaped with what the verdict started (``Escapes``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ascendopt.errors import AscendoptError, EnvironmentProblem

GIT_TIMEOUT_S = 60.0  # git answers in well under a second; a minute means a lock or a network remote


class ProcessTimeout(AscendoptError):
    """A child process ran past its limit and was killed with its process group."""

    def __init__(self, label: str, limit_s: float, *, output: str = "", hint: str | None = None):
        super().__init__(f"{label}: timed out after {limit_s:g} s (killed with its process group)", hint=hint)
        self.label = label
        self.limit_s = limit_s
        self.output = output


def kill_group(proc: subprocess.Popen) -> None:
    """Kill ``proc`` and everything it started (it leads its own session: its group id is its pid)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - a zombie the kernel has not reaped yet
        pass


def run(argv: Sequence[str], *, label: str, timeout: float | None, cwd: str | os.PathLike | None = None,
        env: Mapping[str, str] | None = None, pass_fds: Sequence[int] = (), input: bytes | None = None,
        binary: bool = False) -> subprocess.CompletedProcess:
    """Run ``argv`` to completion with stdout and stderr captured as text (``binary``: as bytes); stdin
    is ``input`` (bytes, which makes the output bytes too) or closed. ``pass_fds``: file descriptors the
    child inherits (``subprocess.Popen``'s).

    ``timeout`` in seconds (None: no limit, for callers that own a limit of their own). On expiry the
    process group is killed and ``ProcessTimeout`` raised with the output so far; an interrupt kills
    the group too before it propagates.
    """
    binary = binary or input is not None
    with OWNED_LOCK:  # owned from its first instant: a concurrent ``Escapes.sweep`` leaves its tree alone
        proc = subprocess.Popen(list(argv), cwd=cwd, env=dict(env) if env is not None else None, text=not binary,
                                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                pass_fds=tuple(pass_fds))
        OWNED.add(proc.pid)
    try:
        out, err = proc.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        kill_group(proc)
        partial = _text(exc.stdout) + _text(exc.stderr)
        raise ProcessTimeout(label, float(timeout or 0), output=partial) from None
    except BaseException:
        kill_group(proc)
        raise
    finally:
        disown(proc.pid)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data


# -- the process tree: what escaped a process group (Linux /proc) --------------------------------

PR_SET_CHILD_SUBREAPER = 36  # prctl(2) option: orphaned descendants are re-parented to the caller, not init
# pids of the children this process started and still waits for (``run``'s, the judge's workers): a sweep
# (``Escapes.sweep``) leaves each one's process tree to its owner
OWNED: set[int] = set()
OWNED_LOCK = threading.Lock()
_SUBREAPER: list[bool] = []  # [whether adopt_orphans succeeded], once per process


def own(pid: int) -> None:
    """Mark the child ``pid`` as owned (``OWNED``) until ``disown``."""
    with OWNED_LOCK:
        OWNED.add(pid)


def disown(pid: int) -> None:
    with OWNED_LOCK:
        OWNED.discard(pid)


def adopt_orphans() -> bool:
    """Make this process a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER, 1)``), once per process: from
    then on every orphaned descendant, whatever its process group or session (a double fork with
    ``setsid`` included), is re-parented to this process instead of init, so it stays in this process's
    tree and can be measured and killed. -> whether it is (False where prctl is unavailable: not Linux)."""
    if not _SUBREAPER:
        adopted = False
        if sys.platform.startswith("linux"):
            import ctypes

            try:
                libc = ctypes.CDLL(None, use_errno=True)
                adopted = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
            except (OSError, AttributeError):
                adopted = False
        _SUBREAPER.append(adopted)
    return _SUBREAPER[0]


@dataclass(frozen=True)
class Proc:
    """One process as ``/proc/PID/stat`` shows it: ``ppid``, process group ``pgid``, ``start`` (clock ticks
    after boot: with the pid it names one process, even where pids are reused), ``cpu_ms`` (user + system
    CPU of the process and of the children it has waited for, ms), ``name`` (the kernel's 15-character
    command name) and whether it is a ``zombie`` (ended, not yet reaped)."""

    ppid: int
    pgid: int
    start: int
    cpu_ms: float
    name: str
    zombie: bool


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def read_proc(pid: int | str) -> Proc | None:
    """``pid``'s ``Proc``; None when it is gone (or there is no ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    close = stat.rfind(b")")
    fields = stat[close + 2:].split()
    try:
        cpu = sum(int(fields[i]) for i in (11, 12, 13, 14)) * 1e3 / _TICK  # utime stime cutime cstime
        return Proc(int(fields[1]), int(fields[2]), int(fields[19]), cpu,
                    stat[stat.find(b"(") + 1:close].decode(errors="replace"), fields[0] == b"Z")
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True)
class Scheduling:
    """What decides how fast a process's threads run besides its code: ``nice``, the scheduling ``policy``, the
    CPUs it may run on (``affinity``), its timer slack (ns: how late a sleep may wake) and its control group
    (``/proc/PID/cgroup``: a group's CPU quota throttles every thread in it)."""

    nice: int
    policy: int
    affinity: frozenset[int]
    slack_ns: int | None
    cgroup: str | None = None


def own_scheduling() -> Scheduling | None:
    """This process's ``Scheduling`` (what its children inherit); None where it cannot be read (not Linux)."""
    try:
        return Scheduling(os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0),
                          frozenset(os.sched_getaffinity(0)), _slack(os.getpid()), _cgroup(os.getpid()))
    except (AttributeError, OSError):
        return None


def _cgroup(pid: int, tid: int | None = None) -> str | None:
    """The control groups of process ``pid`` (thread ``tid``), as ``/proc`` lists them; None: unreadable."""
    try:
        with open(f"/proc/{pid}/task/{tid}/cgroup" if tid is not None else f"/proc/{pid}/cgroup") as f:
            return f.read().strip()
    except OSError:
        return None


# where the cpu controller's hierarchy is mounted: cgroup v1 (either name), then v2 (the unified hierarchy)
CGROUP_V1_CPU = ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct")
CGROUP_V2 = "/sys/fs/cgroup"


def cpu_stat_files(pid: int) -> list[str]:
    """The ``cpu.stat`` files of the CPU control group of process ``pid`` and of every group above it: a quota on
    any of them throttles the process. Empty where none can be read (not Linux, no cpu controller)."""
    group = _cgroup(pid)
    if group is None:
        return []
    files: list[str] = []
    for line in group.splitlines():
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if "cpu" in controllers.split(","):
            mounts = CGROUP_V1_CPU
        elif controllers == "" and line.startswith("0::"):
            mounts = (CGROUP_V2,)
        else:
            continue
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):
            for mount in mounts:
                candidate = os.path.join(mount, *parts[:depth], "cpu.stat")
                if os.path.isfile(candidate) and candidate not in files:
                    files.append(candidate)
                    break
    return files


def throttled_ns(files: Sequence[str]) -> int | None:
    """ns the control groups of ``files`` (``cpu_stat_files``) have been held back by their CPU quotas, summed
    (v1 ``throttled_time``, v2 ``throttled_usec``); None when none can be read."""
    total, read = 0, False
    for name in files:
        try:
            with open(name) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "throttled_time":
                        total, read = total + int(value), True
                    elif key == "throttled_usec":
                        total, read = total + int(value) * 1000, True
        except (OSError, ValueError):
            continue
    return total if read else None


def _slack(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/timerslack_ns") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def enforce_scheduling(pid: int, expected: Scheduling) -> list[str]:
    """Every thread of process ``pid`` back to ``expected`` (the judge's own scheduling, which its workers
    inherit); -> what had been changed, in words ("nice 19", "scheduling policy 5", "CPUs {0}", "timer slack
    1500000 ns", "control group 0::/slow"): another process (the code under test) changed how fast a side runs.
    A control group is only reported (moving a thread back needs the rights that moved it). Threads that end
    meanwhile are passed over."""
    changed: list[str] = []
    try:
        threads = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return changed
    for tid in threads:
        with contextlib.suppress(OSError):
            nice = os.getpriority(os.PRIO_PROCESS, tid)
            if nice != expected.nice:
                changed.append(f"nice {nice}")
                os.setpriority(os.PRIO_PROCESS, tid, expected.nice)
        with contextlib.suppress(OSError):
            policy = os.sched_getscheduler(tid)
            if policy != expected.policy:
                changed.append(f"scheduling policy {policy}")
                os.sched_setscheduler(tid, expected.policy, os.sched_param(0))
        with contextlib.suppress(OSError):
            cpus = frozenset(os.sched_getaffinity(tid))
            if cpus != expected.affinity:
                changed.append(f"CPUs {sorted(cpus)}")
                os.sched_setaffinity(tid, expected.affinity)
        group = _cgroup(pid, tid)
        if expected.cgroup is not None and group is not None and group != expected.cgroup:
            moved = sorted(set(group.splitlines()) - set(expected.cgroup.splitlines()))
            changed.append("control group " + ", ".join(line.split(":", 1)[-1] for line in moved))
    slack = _slack(pid)
    if expected.slack_ns is not None and slack is not None and slack != expected.slack_ns:
        changed.append(f"timer slack {slack} ns")
        with contextlib.suppress(OSError), open(f"/proc/{pid}/timerslack_ns", "w") as f:
            f.write(str(expected.slack_ns))
    return sorted(set(changed))


def schedstats(pid: int | str) -> dict[int, tuple[int, int]] | None:
    """``{thread id: (run ns, wait ns)}`` of the threads of process ``pid`` (``"self"``: this one) since each
    started (``/proc/PID/task/TID/schedstat``): the time each ran on a CPU, and the time it waited on a CPU's
    run queue, runnable but not running (time a loaded host, not the thread's own code, added to its wall
    time). None where it cannot be read (not Linux, no schedstat)."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    stats = {}
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                fields = f.read().split()
            stats[int(tid)] = (int(fields[0]), int(fields[1]))
        except (OSError, IndexError, ValueError):
            continue
    return stats or None


def most_waited_ms(before: Mapping[int, tuple[int, int]] | None, after: Mapping[int, tuple[int, int]] | None
                   ) -> float | None:
    """ms the most delayed thread of a process waited on a run queue between two ``schedstats`` readings (a thread
    new since counts from its start). The most delayed, not the sum: threads that wait side by side stretch the
    process's work once. None where either reading is missing."""
    if before is None or after is None:
        return None
    waited = max((wait - before.get(tid, (0, 0))[1] for tid, (_, wait) in after.items()), default=0)
    return max(0, waited) / 1e6


_continued = [0, False]  # times this process was continued (SIGCONT), whether the handler is installed


def _on_continue(signum: int, frame: Any) -> None:
    _continued[0] += 1


def times_continued() -> int | None:
    """How many times this process has been continued (SIGCONT: it had been stopped) since the first call, which
    installs the counting handler. A stop of the judge's own process stretches every time its clock reads. None
    where it cannot be counted (no SIGCONT, or not called from the main thread)."""
    if not _continued[1]:
        try:
            signal.signal(signal.SIGCONT, _on_continue)
        except (AttributeError, ValueError, OSError):
            return None
        _continued[1] = True
    return _continued[0]


def own_wait_ns() -> int | None:
    """ns the calling thread has waited on a run queue since it started (``/proc/thread-self/schedstat``);
    None where it cannot be read."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None


def run_ms(before: Mapping[int, tuple[int, int]] | None, after: Mapping[int, tuple[int, int]] | None) -> float | None:
    """ms of CPU the threads of a process ran between two ``schedstats`` readings, all together (a thread new since
    counts from its start). None where either reading is missing."""
    if before is None or after is None:
        return None
    return max(0, sum(run - before.get(tid, (0, 0))[0] for tid, (run, _) in after.items())) / 1e6


def excused_wait_ms(before: Mapping[int, tuple[int, int]] | None, after: Mapping[int, tuple[int, int]] | None,
                    main: int) -> float:
    """ms the thread ``main`` of a process waited on a run queue between two ``schedstats`` readings, less the
    time the process's other threads ran meanwhile (a process whose own threads keep its main thread waiting
    is not excused by it). 0.0 where either reading is missing."""
    if not before or not after or main not in before or main not in after:
        return 0.0
    waited = after[main][1] - before[main][1]
    others = sum(run - before.get(tid, (0, 0))[0] for tid, (run, _) in after.items() if tid != main)
    return max(0, waited - max(0, others)) / 1e6


def process_table() -> dict[int, Proc] | None:
    """Every process of the machine (one scan of ``/proc``): ``{pid: Proc}``; None where there is no
    ``/proc`` (not Linux)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    table = {}
    for name in names:
        if name.isdigit():
            proc = read_proc(name)
            if proc is not None:
                table[int(name)] = proc
    return table


def descendants(table: Mapping[int, Proc], root: int, *, stop: Iterable[int] = ()) -> set[int]:
    """The pids below ``root`` in ``table`` (via each process's ppid), ``root`` excluded; the subtrees of the
    pids in ``stop`` are not entered (nor are those pids included)."""
    children: dict[int, list[int]] = {}
    for pid, proc in table.items():
        children.setdefault(proc.ppid, []).append(pid)
    stop = set(stop)
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found and child not in stop and child != root:
                found.add(child)
                todo.append(child)
    return found


class Escapes:
    """What one judging leaves behind: made before it starts its children (and then this process adopts
    orphans, ``adopt_orphans``), ``sweep`` kills every process below this one that started since and that no
    owned child (``OWNED``) holds in its tree -- a process that escaped a killed group with ``setsid``
    included -- and reaps those re-parented here. Processes below this one that were there before are left
    alone (an embedding process's own children)."""

    def __init__(self) -> None:
        self.root = os.getpid()
        self.adopting = adopt_orphans()
        table = process_table() or {}
        self.before = {(pid, table[pid].start) for pid in descendants(table, self.root)}

    def sweep(self, limit_s: float = 10.0) -> list[int]:
        """SIGKILL the processes described above until none is left running, reaping every one whose parent
        is now this process (never an owned child: ``subprocess`` waits for those) -> the pids killed."""
        killed: set[int] = set()
        deadline = time.monotonic() + limit_s
        while True:
            with OWNED_LOCK:
                table = process_table()
                if table is None:
                    return []
                old = [pid for pid, proc in table.items() if (pid, proc.start) in self.before]
                left = descendants(table, self.root, stop=[*OWNED, *old])
                for pid in left:
                    if not table[pid].zombie and _same(pid, table[pid].start):
                        with _quiet():
                            os.kill(pid, signal.SIGKILL)
                        killed.add(pid)
            ours = [pid for pid in left if table[pid].ppid == self.root]
            for pid in ours:
                with _quiet():
                    os.waitpid(pid, os.WNOHANG)
            pending = [pid for pid in left if pid in ours or not table[pid].zombie]
            if not pending or time.monotonic() > deadline:
                return sorted(killed)
            time.sleep(0.002)


def _same(pid: int, start: int) -> bool:
    """``pid`` is still the process that started at ``start`` (not a reused pid)."""
    proc = read_proc(pid)
    return proc is not None and proc.start == start


def _quiet():
    import contextlib

    return contextlib.suppress(ProcessLookupError, PermissionError, ChildProcessError)


# -- the judge's git ---------------------------------------------------------------------------
#
# Every git command ascendopt runs goes through ``git_run``. A repository can configure what git sees and
# runs: hooks (run by checkout, commit, update-ref), replace refs and grafts (a commit shown with other
# content), attribute filters, textconv and eol conversion (a file shown other than stored), fsmonitor and
# the untracked cache (a changed file reported unchanged), and the environment can point git at another
# repository, index or configuration. The judge reads none of that: the user's and the system's
# configuration are not read, every GIT_* variable of the environment is dropped, replace refs and grafts
# are off, and the core settings that change what git sees are fixed on the command line (which wins
# over the repository's own configuration). Contents are never read through a checkout: ``ascendopt.vcs``
# reads objects raw (``cat-file``) and verifies each against its id, and hashes working-tree files itself
# (index bits such as assume-unchanged and skip-worktree are never asked).

JUDGE_GIT_CONFIG = (
    "core.hooksPath=/dev/null", "core.fsmonitor=false", "core.untrackedCache=false", "core.autocrlf=false",
    "core.eol=lf", "core.safecrlf=false", "core.attributesFile=/dev/null", "core.sparseCheckout=false",
    "core.splitIndex=false", "core.symlinks=true", "core.quotePath=false", "core.pager=cat", "core.askPass=",
    "core.sshCommand=false", "diff.external=", "gc.auto=0", "maintenance.auto=false", "commit.gpgSign=false",
    "tag.gpgSign=false", "log.showSignature=false", "protocol.allow=never", "fetch.recurseSubmodules=false",
    "submodule.recurse=false", "index.sparse=false", "feature.manyFiles=false", "color.ui=false",
)
# What the judge sets in git's environment (after dropping every GIT_* variable of its own)
JUDGE_GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_NO_REPLACE_OBJECTS": "1",
                 "GIT_GRAFT_FILE": os.devnull, "GIT_ATTR_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
                 "GIT_OPTIONAL_LOCKS": "0", "GIT_NO_LAZY_FETCH": "1", "GIT_ADVICE": "0", "LC_ALL": "C"}
# Variables ascendopt itself may set for one command (a temporary index, the snapshot commits' identity)
_JUDGE_OWN = ("GIT_INDEX_FILE", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
              "GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE")


_GLOBAL_CONFIG: dict[str, str] = {}


def _judge_global_config() -> str:
    """What the judge's git reads as its global configuration: nothing, except the ``safe.directory``
    entries of the user's and the system's configuration (git honours those only from there, and a CI
    container whose checkout belongs to another user needs them); a file written once per process."""
    if "path" in _GLOBAL_CONFIG:
        return _GLOBAL_CONFIG["path"]
    _GLOBAL_CONFIG["path"] = os.devnull
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    try:  # from the filesystem root: no repository's own configuration is read
        proc = run(["git", "config", "--get-all", "safe.directory"], label="git config", timeout=GIT_TIMEOUT_S,
                   cwd=os.path.abspath(os.sep), env=env)
    except (OSError, ProcessTimeout):
        return os.devnull
    dirs = [line for line in proc.stdout.splitlines() if line.strip()] if proc.returncode == 0 else []
    if dirs:
        import atexit
        import tempfile

        fd, path = tempfile.mkstemp(prefix="ascendopt-gitconfig-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write("[safe]\n" + "".join(f"\tdirectory = {d}\n" for d in dirs))
        atexit.register(lambda: os.path.exists(path) and os.unlink(path))
        _GLOBAL_CONFIG["path"] = path
    return _GLOBAL_CONFIG["path"]


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of the judge's git: this process's without any GIT_* variable, plus ``JUDGE_GIT_ENV``
    (the global configuration: only the user's ``safe.directory`` entries) and ``extra`` (only the variables
    in ``_JUDGE_OWN``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(JUDGE_GIT_ENV)
    env["GIT_CONFIG_GLOBAL"] = _judge_global_config()
    for key, value in (extra or {}).items():
        if key not in _JUDGE_OWN:
            raise ValueError(f"git_env: {key} is not one of the variables the judge sets")
        env[key] = value
    return env


def git_argv(*args: str) -> list[str]:
    """``git`` with the judge's fixed configuration (``JUDGE_GIT_CONFIG``) and ``--no-replace-objects``."""
    argv = ["git", "--no-replace-objects"]
    for item in JUDGE_GIT_CONFIG:
        argv += ["-c", item]
    return argv + list(args)


def git_run(*args: str, cwd: str | os.PathLike, timeout: float = GIT_TIMEOUT_S, input: bytes | None = None,
            binary: bool = False, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the judge's git (``git_argv``, ``git_env(env)``) in ``cwd``; the completed process (bytes with
    ``input`` or ``binary``). Raises OSError (no git) or ProcessTimeout like ``run``."""
    return run(git_argv(*args), label=f"git {' '.join(args[:2])}", timeout=timeout, cwd=cwd, env=git_env(env),
               input=input, binary=binary)


def git(*args: str, cwd: str | os.PathLike, check: bool = False, timeout: float = GIT_TIMEOUT_S) -> str | None:
    """``git args`` in ``cwd`` (the judge's git: ``git_run``): its stdout, stripped. Without ``check`` a
    failure (or no git) gives None; with ``check`` it raises EnvironmentProblem (exit 5) naming the command
    and git's message."""
    try:
        proc = git_run(*args, cwd=cwd, timeout=timeout)
    except (OSError, ProcessTimeout) as exc:
        if check:
            raise EnvironmentProblem(f"git {' '.join(args[:2])} in {Path(cwd)}: {exc}") from None
        return None
    if proc.returncode != 0:
        if check:
            last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
            raise EnvironmentProblem(f"git {' '.join(args[:2])} failed in {Path(cwd)}: {last}",
                                     hint="the frozen commit must be reachable (CI: fetch the full history)")
        return None
    return proc.stdout.strip()
