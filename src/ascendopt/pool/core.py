"""The pool's scheduler: items of one job spread over devices, under the judge's rules per device.

A *job* (``Job``) is shipped to every device once (a forked process inherits it; a Ray actor receives it) and
serves two requests there: ``anchor()`` re-measures the frozen baseline on that device and says whether it is off
the frozen anchor (``judge.engine.anchor_problem``), and ``run(item)`` does one item (a configuration screened
interleaved with the start, a workspace gated). A *back end* (``pool.local.LocalPool``, ``pool.ray_pool.RayPool``)
starts one server per device and carries requests and replies.

``run_pool`` keeps these rules:

* every device anchors before its first item and again after its last (``ANCHOR_AGAIN``): a device off the anchor
  is *quarantined*, named with the anchor's reason; whatever it measured is dropped and re-queued on the others;
* a device that dies, or whose item outlives ``item_s``, is *lost*: it is killed and its item re-queued, at most
  ``MAX_ATTEMPTS`` times in all (then the item's result is the failure, ``{"error": ...}``);
* every result says which device measured it (``device``), and ``PoolRun.measured`` lists it by device;
* nothing waits without a limit: each request has ``item_s`` (the anchor ``anchor_s``), the whole run ``total_s``;
* with no device left healthy and items left, ``EnvironmentProblem`` (exit 5) names every device and why.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ascendopt.errors import EnvironmentProblem

# An item is tried on at most this many devices: a second device tells a lost device from an item that kills
# whatever runs it (then its result is the failure, and the pool goes on)
MAX_ATTEMPTS = 2
# Re-measure the anchor after a device's last item too: a device that drifted while it worked (another job moved
# onto it, a clock throttled) has its results dropped, not only a device that started off
ANCHOR_AGAIN = True
# How often the scheduler looks at the devices while none replies, s (progress, limits)
POLL_S = 0.5


class DeviceLost(Exception):
    """A device's server is gone (killed, crashed, node lost) or outlived its request's limit."""

    def __init__(self, device: str, why: str):
        super().__init__(f"{device}: {why}")
        self.device, self.why = device, why


class Job(Protocol):
    """What runs on a pool. ``label``: what one item is called (progress, errors)."""

    label: str

    def key(self, item: Any) -> str:
        """The item's name (results and ``PoolRun.measured`` are keyed by it)."""

    def anchor(self) -> dict[str, Any]:
        """On a device: the frozen baseline re-measured there -> ``{"problem": str | None, "median_ms": float |
        None, ...}`` (problem None: within the drift allowance, or nothing frozen to compare with)."""

    def run(self, item: Any) -> dict[str, Any]:
        """On a device: one item -> its result (JSON-ready; ``{"stop": True}`` in it ends the pool's dispatch;
        ``{"quarantine": why}``: the item's own anchor found this device off, so it is quarantined and the item
        re-queued)."""


class Backend(Protocol):
    """One server per device: ``names`` in order; ``submit(name, op, item)`` (op "anchor" or "run"),
    ``ready(timeout_s)`` -> names with a reply (or dead), ``result(name)`` -> the reply (raises ``DeviceLost``),
    ``kill(name)``, ``close()``."""

    names: list[str]

    def submit(self, name: str, op: str, item: Any) -> None: ...

    def ready(self, timeout_s: float) -> list[str]: ...

    def result(self, name: str) -> Any: ...

    def kill(self, name: str) -> None: ...

    def close(self) -> None: ...


@dataclass
class PoolRun:
    """What a pool did: ``results`` by item key in the order they completed (each with its ``device``),
    ``anchors`` by device (a list: first, then again), ``quarantined`` / ``lost`` ``{device: why}``, ``measured``
    ``{device: [item keys]}`` (only results kept), ``requeued`` item keys moved off a device, ``seconds`` wall."""

    devices: list[str]
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    anchors: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    quarantined: dict[str, str] = field(default_factory=dict)
    lost: dict[str, str] = field(default_factory=dict)
    requeued: list[str] = field(default_factory=list)
    stopped: str = ""  # "done" | "stopped" (the caller's stop(): budget or time) | "stop" (an item asked)
    seconds: float = 0.0

    @property
    def measured(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {d: [] for d in self.devices}
        for key, result in self.results.items():
            out.setdefault(result.get("device", "?"), []).append(key)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"devices": list(self.devices), "anchors": self.anchors, "quarantined": dict(self.quarantined),
                "lost": dict(self.lost), "measured": self.measured, "requeued": list(self.requeued),
                "stopped": self.stopped, "seconds": round(self.seconds, 3)}


@dataclass
class Progress:
    """The pool as progress shows it: devices ``busy`` / ``idle``, ``done`` of ``total`` items, ``eta_s`` (the
    seconds left at the pace so far; None before the first item), ``quarantined`` and ``lost`` device names."""

    busy: list[str]
    idle: list[str]
    done: int
    total: int
    eta_s: float | None
    quarantined: list[str]
    lost: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"busy": self.busy, "idle": self.idle, "done": self.done, "total": self.total, "eta_s": self.eta_s,
                "quarantined": self.quarantined, "lost": self.lost}


def run_pool(backend: Backend, job: Job, items: Sequence[Any], *, item_s: float, anchor_s: float,
             total_s: float, stop: Callable[[], bool] = lambda: False,
             on_result: Callable[[dict[str, Any], Progress], None] | None = None,
             on_progress: Callable[[Progress], None] | None = None) -> PoolRun:
    """Run ``job`` over ``items`` on ``backend``'s devices (see the module docstring). ``item_s``: seconds one item
    may take on a device, ``anchor_s`` one anchor, ``total_s`` the whole run (then what is running is killed, and
    ``EnvironmentProblem`` names the limit). ``stop()``: no new item is dispatched once it says so (a budget);
    ``on_result(result, progress)`` after each kept result, ``on_progress`` whenever the pool's state changes."""
    t0 = time.monotonic()
    run = PoolRun(devices=list(backend.names))
    queue: deque[Any] = deque(items)
    attempts: dict[str, int] = {}
    total = len(queue)
    # per device: what it is doing ("anchor", "again", "item"), the item, when it started
    doing: dict[str, tuple[str, Any, float]] = {}
    healthy: set[str] = set()  # anchored and not quarantined or lost
    closed: set[str] = set()  # anchored again after its last item
    halted = [False]

    def progress() -> Progress:
        done = len(run.results)
        spent = time.monotonic() - t0
        busy = [d for d in run.devices if d in doing]
        live = [d for d in run.devices if d not in run.quarantined and d not in run.lost]
        eta = round(spent / done * max(0, total - done), 1) if done else None
        return Progress(busy, [d for d in live if d not in doing], done, total, eta, sorted(run.quarantined),
                        sorted(run.lost))

    def tell() -> None:
        if on_progress:
            on_progress(progress())

    def requeue(key_items: list[Any], device: str) -> None:
        for item in key_items:
            key = job.key(item)
            run.results.pop(key, None)
            run.requeued.append(key)
            queue.appendleft(item)

    def dispatch(device: str) -> None:
        if device not in healthy:
            return
        if queue and not halted[0] and not stop():
            item = queue.popleft()
            attempts[job.key(item)] = attempts.get(job.key(item), 0) + 1
            backend.submit(device, "run", item)
            doing[device] = ("item", item, time.monotonic())
            closed.discard(device)
        elif ANCHOR_AGAIN and device not in closed and any(r.get("device") == device for r in run.results.values()):
            backend.submit(device, "anchor", None)
            doing[device] = ("again", None, time.monotonic())

    def lose(device: str, why: str) -> None:
        what, item, _ = doing.pop(device, ("", None, 0.0))
        healthy.discard(device)
        run.lost[device] = why
        if what == "item":
            key = job.key(item)
            if attempts.get(key, 0) < MAX_ATTEMPTS:
                requeue([item], device)
            else:
                run.results[key] = {"error": f"lost {MAX_ATTEMPTS} devices while on it (last: {device}: {why})",
                                    "device": device, "key": key}
        tell()

    def quarantine(device: str, why: str) -> None:
        healthy.discard(device)
        run.quarantined[device] = why
        # what it measured is not evidence: dropped, and measured again elsewhere
        dropped = [r["_item"] for r in run.results.values() if r.get("device") == device]
        requeue(dropped, device)
        for other in list(healthy):
            if other not in doing:
                dispatch(other)
        tell()

    try:
        for name in backend.names:
            backend.submit(name, "anchor", None)
            doing[name] = ("anchor", None, time.monotonic())
        tell()
        while doing:
            if time.monotonic() - t0 > total_s:
                raise EnvironmentProblem(f"pool: {len(run.results)} of {total} {job.label}(s) done within the "
                                         f"pool's limit of {total_s:g} s; still running on "
                                         + ", ".join(sorted(doing)),
                                         hint="--timeout raises the limits; fewer items (--budget) end sooner")
            for device in backend.ready(POLL_S):
                what, item, _ = doing.get(device, ("", None, 0.0))
                if not what:
                    continue
                try:
                    reply = backend.result(device)
                except DeviceLost as exc:
                    lose(device, exc.why)
                    continue
                doing.pop(device)
                if what in ("anchor", "again"):
                    run.anchors.setdefault(device, []).append(reply)
                    if reply.get("problem"):
                        quarantine(device, str(reply["problem"]))
                        continue
                    if what == "again":
                        closed.add(device)
                    healthy.add(device)
                elif reply.get("quarantine"):
                    # the job anchored this item on the device itself (a gate's own anchor) and found it off: the
                    # device is quarantined, the item goes elsewhere (not counted as an attempt: nothing failed)
                    attempts[job.key(item)] -= 1
                    requeue([item], device)
                    quarantine(device, str(reply["quarantine"]))
                    continue
                else:
                    key = job.key(item)
                    result = {**reply, "device": device, "key": key, "_item": item}
                    run.results[key] = result
                    if reply.get("stop"):
                        halted[0] = True
                    if on_result:
                        on_result({k: v for k, v in result.items() if k != "_item"}, progress())
                dispatch(device)
                tell()
            now = time.monotonic()
            for device, (what, item, started) in list(doing.items()):
                limit = anchor_s if what in ("anchor", "again") else item_s
                if now - started > limit:
                    backend.kill(device)
                    lose(device, f"{'its anchor' if what != 'item' else job.key(item)} outlived its limit of "
                                 f"{limit:g} s")
            # a device freed by a requeue elsewhere picks the work up
            for device in list(healthy):
                if device not in doing:
                    dispatch(device)
        left = [job.key(i) for i in queue]
        if left and not halted[0] and not stop():
            why = "; ".join(f"{d}: quarantined ({w})" for d, w in run.quarantined.items())
            why += ("; " if why and run.lost else "") + "; ".join(f"{d}: lost ({w})" for d, w in run.lost.items())
            raise EnvironmentProblem(f"pool: no healthy device left for {len(left)} {job.label}(s): {why}",
                                     hint="check the devices named (ascendopt env), or run on fewer")
        run.stopped = "stop" if halted[0] else ("stopped" if left else "done")
    finally:
        for device in list(doing):
            backend.kill(device)
        run.seconds = time.monotonic() - t0
    for result in run.results.values():
        result.pop("_item", None)
    return run
