"""The Ray back end (``--ray [ADDRESS]``): one Ray actor per device serving the pool's job.

A device is one unit of the device resource of its backend: ``resources={"NPU": 1}`` on Ascend (Ray's native
``NPU`` resource), ``num_gpus=1`` on CUDA, and on cpu the custom resource ``device`` (``CPU_RESOURCE``) that a
cluster declares for its CPU "devices" (``ray start --resources '{"device": 2}'``; the local Ray started for a
command declares one per usable core). The pool has as many devices as the cluster has units (``--devices N``
caps it). ``ADDRESS``: an existing cluster (``host:port``, ``ray://host:port`` or ``auto``), checked to answer
within ``CONNECT_S`` before Ray is asked (Ray itself would wait minutes); ``local`` (``--ray`` alone): a Ray started
for this command and stopped after it, unless this process is already connected to one (then that one is used).

Ray's own output stays away from the user: workers' logs are not sent to the driver (``log_to_driver=False``), its
loggers are set to errors only, and its import-time warnings are silenced. Each actor runs in its own worker
process, the job shipped to it once; a dead actor (its process killed, its node gone) is a lost device.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import warnings
from typing import Any

from ascendopt.errors import EnvironmentProblem, UsageError
from ascendopt.pool.core import DeviceLost
from ascendopt.pool.devices import DEVICE_ENV, LOCAL_RAY, forwarded_env

INSTALL = "pip install 'ascendopt[pool]'"
# The custom resource standing for a device on the cpu backend
CPU_RESOURCE = "device"
# An existing cluster's address must answer a TCP connect within this, s
CONNECT_S = 5.0
# Ray's start-up for the command (a local Ray) and the actors' start, s
START_S = 120.0


def _ray():
    """Ray, imported quietly; UsageError (exit 2) saying how to install it where it is missing."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import ray
    except ImportError:
        raise UsageError(f"--ray: Ray is not installed ({INSTALL})") from None
    for name in ("ray", "ray.worker", "ray._private.worker", "ray.util"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return ray


def check(address: str) -> None:
    """``--ray``'s address checked before any work: Ray importable, and an address other than ``local`` / ``auto``
    answering a TCP connect within ``CONNECT_S``. UsageError (exit 2) naming it."""
    _ray()
    if address in (LOCAL_RAY, "auto"):
        return
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise UsageError(f"--ray {address}: not a Ray address (host:port, ray://host:port, auto, or --ray alone for "
                         "a local Ray)")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_S):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(f"--ray {address}: no Ray cluster answers there ({reason.lower()} within {CONNECT_S:g} s)",
                         hint="start one with `ray start --head`, or give --ray alone for a local Ray") from None


def device_resource(backend: str) -> tuple[str, dict[str, Any]]:
    """``(resource name, actor options)`` of one device of ``backend``."""
    if backend == "npu":
        return "NPU", {"resources": {"NPU": 1}}
    if backend == "cuda":
        return "GPU", {"num_gpus": 1}
    return CPU_RESOURCE, {"resources": {CPU_RESOURCE: 1}}


class _Server:
    """The actor: one device's server of the job (``anchor`` / ``run``), quiet like a local device process. The
    job arrives pickled and is read only after the environment is set (a kernel module reads it on import)."""

    def __init__(self, blob: bytes, name: str, env: dict[str, str]):
        os.environ.update(env)
        os.environ[DEVICE_ENV] = name
        from ascendopt import console

        console.detach()
        from ascendopt.pool.local import one_thread_if_cpu

        one_thread_if_cpu()
        from ray import cloudpickle

        self.job = cloudpickle.loads(blob)

    def call(self, op: str, item: Any) -> Any:
        return self.job.anchor() if op == "anchor" else self.job.run(item)


class RayPool:
    """One actor per device of the Ray cluster at ``address`` (``pool.core.Backend``); ``count``: at most this many
    devices (``--devices N``)."""

    def __init__(self, address: str, job: Any, backend: str, count: int | None = None):
        ray = self.ray = _ray()
        self._started = False
        resource, options = device_resource(backend)
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR,
                                      "include_dashboard": False, "configure_logging": True}
            if address == LOCAL_RAY:
                cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
                units = count or cores
                kwargs.update(num_cpus=max(cores, units),
                              resources={CPU_RESOURCE: units} if resource == CPU_RESOURCE else None)
            else:
                kwargs["address"] = address
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ray.init(**kwargs)
            except Exception as exc:  # noqa: BLE001 - Ray's many failures to start or connect, said in one line
                raise EnvironmentProblem(f"--ray {address}: Ray did not start or connect: "
                                         f"{str(exc).strip().splitlines()[0][:300] if str(exc).strip() else exc!r}",
                                         hint="`ray status` on the cluster says what it has") from None
            self._started = True
        units = int(ray.cluster_resources().get(resource, 0))
        if units < 1:
            self.close()
            raise EnvironmentProblem(f"--ray {address}: the cluster has no {resource!r} resource (its devices)",
                                     hint=f"start its nodes with --resources '{{\"{CPU_RESOURCE}\": N}}'"
                                     if resource == CPU_RESOURCE else "start Ray where the devices are")
        units = min(units, count) if count else units
        self.names = [f"ray:{k}" for k in range(units)]
        # the actor neither restarts nor retries: a lost device is the pool's to re-queue, not Ray's to repeat
        remote = ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0, **options)(_Server)
        blob, env = ray.cloudpickle.dumps(job), forwarded_env()
        self._actors = {name: remote.remote(blob, name, env) for name in self.names}
        self._refs: dict[str, Any] = {}
        self._done: dict[str, Any] = {}

    def submit(self, name: str, op: str, item: Any) -> None:
        self._refs[name] = self._actors[name].call.remote(op, item)

    def ready(self, timeout_s: float) -> list[str]:
        by_ref = {ref: name for name, ref in self._refs.items()}
        if not by_ref:
            return []
        done, _ = self.ray.wait(list(by_ref), num_returns=1, timeout=timeout_s)
        more, _ = self.ray.wait(list(by_ref), num_returns=len(by_ref), timeout=0)
        return sorted({by_ref[r] for r in [*done, *more]})

    def result(self, name: str) -> Any:
        ref = self._refs.pop(name)
        try:
            return self.ray.get(ref, timeout=START_S)
        except self.ray.exceptions.RayActorError as exc:
            raise DeviceLost(name, f"its actor died ({type(exc).__name__})") from None
        except self.ray.exceptions.RayTaskError as exc:
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            raise DeviceLost(name, f"raised {type(cause).__name__}: {str(cause).splitlines()[0][:200]}") from None
        except self.ray.exceptions.GetTimeoutError:
            self.kill(name)
            raise DeviceLost(name, f"no reply within {START_S:g} s") from None

    def kill(self, name: str) -> None:
        self._refs.pop(name, None)
        actor = self._actors.get(name)
        if actor is not None:
            with contextlib.suppress(Exception):
                self.ray.kill(actor, no_restart=True)

    def close(self) -> None:
        for name in list(getattr(self, "_actors", {})):
            self.kill(name)
        if self._started:
            with contextlib.suppress(Exception):
                self.ray.shutdown()
