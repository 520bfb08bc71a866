"""The local back end (``--devices N|LIST``): one device process per device of this host.

Each process is started once per command and serves the job's requests over a pipe until closed (the pool's
scheduler, ``pool.core.run_pool``, gives each request its limit and kills a process that outlives it). On the cpu
backend the processes are forked: the job (its kernel, inputs and clock) and the interpreter's state are
inherited, so a process is ready at once and runs exactly the parent's code. On a device backend they are
spawned fresh (a device runtime does not survive a fork) and see only their device (``devices.VISIBLE_ENV``), set
before anything imports the runtime. Each runs in its own session, quiet, its output in a log file of its own:
nothing a device process prints reaches the user, and Ctrl-C reaches the command, which closes the pool.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import signal
import tempfile
import traceback
from multiprocessing.connection import wait
from typing import Any

from ascendopt.pool.core import DeviceLost
from ascendopt.pool.devices import Device, enter, forwarded_env

# How long a closing device process may take to go after its pipe is closed, s, before it is killed
CLOSE_S = 2.0


def _serve(conn, dev: Device, job: Any, log_path: str) -> None:
    """A device process: its device and cores first, then the job (unpickled only now, after the environment that
    picks its device is set), then one reply per request: ``("ok", value)`` or ``("raised", text)``."""
    os.setsid()  # its own session: a signal to the command's terminal goes to the command, which closes the pool
    with open(log_path, "ab", buffering=0) as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    enter(dev)
    from ascendopt import console

    console.detach()
    one_thread_if_cpu()
    if isinstance(job, bytes):  # spawned: the job arrives pickled, and is read only now
        job = pickle.loads(job)
    while True:
        try:
            op, item = conn.recv()
        except (EOFError, OSError):
            return
        try:
            value = job.anchor() if op == "anchor" else job.run(item)
            conn.send(("ok", value))
        except BaseException as exc:  # noqa: BLE001 - told to the scheduler, which names the device and moves on
            conn.send(("raised", "".join(traceback.format_exception_only(type(exc), exc)).strip()))


def one_thread_if_cpu() -> None:
    """On the cpu backend a device computes on one thread for good (``bench.one_thread_on_cpu``: as freeze timed the
    anchor). It is also what makes a forked device safe: the parent's OpenMP pool does not survive the fork, and a
    parallel region in the child would wait for its threads forever."""
    from ascendopt.device import backends

    if backends.current().name == "cpu":
        import torch

        torch.set_num_threads(1)


class LocalPool:
    """The device processes of ``devices`` serving ``job`` (``pool.core.Backend``). ``fork``: inherit the job
    (cpu backend); else spawn, the job pickled (a bundled kernel by its registry name: ``job.portable()``)."""

    def __init__(self, devices: list[Device], job: Any, *, fork: bool):
        self.names = [d.name for d in devices]
        self._logs = tempfile.TemporaryDirectory(prefix="ascendopt-pool-")
        ctx = multiprocessing.get_context("fork" if fork else "spawn")
        # forked: the job is inherited as it is (no pickling: a kernel's lambdas need none)
        shipped = job if fork else pickle.dumps(job.portable())
        self._procs: dict[str, Any] = {}
        self._conns: dict[str, Any] = {}
        self._pending: set[str] = set()
        try:
            for dev in devices:
                if not fork:  # a spawned process starts from the environment, not from this process's state
                    dev = Device(dev.name, dev.index, dev.cpus, {**forwarded_env(), **dev.env})
                parent, child = ctx.Pipe()
                log = os.path.join(self._logs.name, dev.name.replace(":", "-") + ".log")
                proc = ctx.Process(target=_serve, args=(child, dev, shipped, log), name=f"ascendopt-{dev.name}",
                                   daemon=True)
                proc.start()
                child.close()
                self._procs[dev.name], self._conns[dev.name] = proc, parent
        except BaseException:
            self.close()
            raise

    def submit(self, name: str, op: str, item: Any) -> None:
        try:
            self._conns[name].send((op, item))
        except (OSError, ValueError) as exc:
            raise DeviceLost(name, f"its process is gone ({exc})") from None
        self._pending.add(name)

    def ready(self, timeout_s: float) -> list[str]:
        waiting = {self._conns[n]: n for n in self._pending}
        waiting.update({self._procs[n].sentinel: n for n in self._pending})
        found = wait(list(waiting), timeout_s) if waiting else []
        return sorted({waiting[x] for x in found})

    def result(self, name: str) -> Any:
        self._pending.discard(name)
        conn, proc = self._conns[name], self._procs[name]
        try:
            if conn.poll():
                how, value = conn.recv()
                if how == "ok":
                    return value
                raise DeviceLost(name, f"raised {value.splitlines()[-1] if value else '?'}")
        except (EOFError, OSError):
            pass
        proc.join(0.1)
        code = proc.exitcode
        self.kill(name)
        raise DeviceLost(name, "its process died" + (f" (signal {-code})" if code is not None and code < 0 else
                                                      f" (exit {code})" if code is not None else ""))

    def log(self, name: str) -> str:
        """What the device process ``name`` printed (its log file), for a diagnosis."""
        path = os.path.join(self._logs.name, name.replace(":", "-") + ".log")
        with contextlib.suppress(OSError), open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
        return ""

    def kill(self, name: str) -> None:
        """Kill the process of ``name`` with its session's process group (what its job started goes too)."""
        self._pending.discard(name)
        proc = self._procs.get(name)
        if proc is None or proc.pid is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.join(CLOSE_S)

    def close(self) -> None:
        for name in list(self._procs):
            with contextlib.suppress(OSError):
                self._conns[name].close()
            self.kill(name)
        self._logs.cleanup()
