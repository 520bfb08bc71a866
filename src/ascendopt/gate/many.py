"""``ascendopt gate --all``: every workspace of the repository gated, on a pool of devices where given, with one
exit code and one JUnit file for the lot.

Workspaces are the folders named ``.ascendopt`` holding a ``contract.yaml`` under the project root
(``find_workspaces``: ``.git``, virtual environments and other hidden folders are not searched). Each is gated
exactly as ``ascendopt gate`` gates it (``stages.run_gate``), on one device (``GateJob``). On a pool, before a
bundled kernel's gate times anything, its device re-measures that contract's frozen baseline (the screening's
anchor, ``tune.pooled.ScreenJob.anchor``); an own-code gate anchors itself (its performance stage). A device off
an anchor is quarantined (``pool.core``) and the workspace gated again elsewhere. Every result names its device.

The exit code of the lot is the worst of the workspaces' by ``EXIT_PRECEDENCE``.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ascendopt.errors import ExitCode
from ascendopt.workspace import Workspace

# Which workspace's exit code is the lot's, worst first: a contract that cannot be trusted (3) before a wrong
# kernel (1), before a workspace that could not be read or run (2, 5), before a measured regression (4), before a
# timing that could not tell (6); 0 only when every workspace passed. An integrity break hides nothing else: each
# workspace's own code is in the JSON and the JUnit file.
EXIT_PRECEDENCE = (ExitCode.INTEGRITY, ExitCode.CORRECTNESS, ExitCode.USAGE, ExitCode.ENVIRONMENT,
                   ExitCode.PERFORMANCE, ExitCode.INCONCLUSIVE, ExitCode.OK)
# Folders never searched for workspaces (besides hidden ones other than the workspace folder itself)
SKIP_DIRS = {"node_modules", "__pycache__", "site-packages", "venv", "build", "dist"}


def find_workspaces(root: Path) -> list[Path]:
    """The workspace folders under ``root`` (``DIRNAME`` folders holding a ``contract.yaml``), sorted."""
    from ascendopt.workspace import DIRNAME

    found = []
    for here, dirs, _files in os.walk(root):
        if Path(here).name == DIRNAME:
            if (Path(here) / "contract.yaml").is_file():
                found.append(Path(here))
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and (not d.startswith(".") or d == DIRNAME)]
    return sorted(found)


def worst_exit(codes: Sequence[int]) -> int:
    """The lot's exit code: the first of ``EXIT_PRECEDENCE`` among ``codes`` (an unknown code counts as 70's place:
    after every known failure, before a pass)."""
    rank = {int(c): i for i, c in enumerate(EXIT_PRECEDENCE)}
    return min(codes, key=lambda c: rank.get(int(c), len(EXIT_PRECEDENCE) - 1.5), default=0)


@dataclass
class GateJob:
    """``gate`` of one workspace per item (a path under ``root``), on whichever device runs it (``pool.core.Job``).
    ``anchor_each``: on a pool, re-measure a bundled kernel's frozen baseline on the device before its gate."""

    root: str
    skip_perf: bool = False
    pairs: int = 30
    timeout: float | None = None
    accept_implausible: str | None = None
    timer: Callable[[], float] | None = None
    anchor_each: bool = True
    # the bundled kernels the workspaces name, as the command resolved them: a device in a fresh interpreter (a Ray
    # actor) serves these (``kernels.use``), not whatever its own registry holds
    specs: dict[str, Any] | None = None
    label: str = "workspace"

    def portable(self) -> GateJob:
        return self

    def key(self, item: str) -> str:
        return os.path.relpath(item, self.root)

    def anchor(self) -> dict[str, Any]:
        """A gate anchors per workspace (each has its own frozen baseline): see ``run``."""
        from ascendopt.pool.devices import current

        return {"device": current(), "problem": None, "per": "workspace"}

    def run(self, item: str) -> dict[str, Any]:
        """Gate the workspace ``item`` -> ``{"workspace", "exit_code", "passed", "result" (GateResult.to_dict),
        "junit" (its JUnit XML), "error" (a workspace that could not be gated, one line), "anchor" (its frozen baseline
        re-measured on this device, ``ScreenJob.anchor``; None: not anchored here)}``; ``{"quarantine": why}``
        when the device is off this contract's anchor (its own, or the gate's performance stage's)."""
        from ascendopt.errors import AscendoptError
        from ascendopt.gate.stages import run_gate
        from ascendopt.judge.engine import ANCHOR_MOVED
        if self.specs:
            from ascendopt import kernels

            kernels.use(self.specs)
        ws = Workspace(Path(item))
        anchor = None
        try:
            if self.anchor_each and not self.skip_perf:
                anchor = self._anchor(ws)
                if anchor and anchor["problem"]:
                    return {"quarantine": f"{self.key(item)}: {anchor['problem']}"}
            result = run_gate(ws, skip_perf=self.skip_perf, pairs=self.pairs, timeout=self.timeout,
                              accept_implausible=self.accept_implausible, timer=self.timer)
        except AscendoptError as exc:
            return {"workspace": self.key(item), "exit_code": int(exc.exit_code), "passed": False, "result": None,
                    "junit": None, "error": str(exc)}
        perf = next((s for s in result.stages if s.name == "performance"), None)
        if self.anchor_each and perf is not None and perf.status == "inconclusive" and ANCHOR_MOVED in perf.summary:
            return {"quarantine": f"{self.key(item)}: {perf.summary}"}
        return {"workspace": self.key(item), "exit_code": result.exit_code, "passed": result.passed,
                "result": result.to_dict(), "junit": result.to_junit(self.root), "error": None, "anchor": anchor}

    def _anchor(self, ws) -> dict[str, Any] | None:
        """A bundled kernel's frozen baseline re-measured on this device (``ScreenJob.anchor``: its ``problem`` None
        within the drift allowance); None: nothing to anchor here (own code anchors in its gate; no frozen
        baseline)."""
        from ascendopt.gate.stages import frozen_baseline
        from ascendopt.rounds.context import RoundContext
        from ascendopt.tune.pooled import ScreenJob

        ctx = RoundContext.load(ws)
        if not ctx.is_kernel:
            return None
        contract = ctx.contract
        frozen = frozen_baseline(contract, None)
        if frozen is None:
            return None
        w = contract.workload
        job = ScreenJob(ctx.spec, dict(w.shapes[0].dims), w.dtype, w.mode, dict(ctx.baseline_config),
                        dict(ctx.baseline_config), frozen.median_ms, frozen.waited_ms, contract.tolerances or None,
                        self.timer)
        return job.anchor()


def gate_all(root: Path, *, pool=None, skip_perf: bool = False, pairs: int = 30, timeout: float | None = None,
             accept_implausible: str | None = None, timer: Callable[[], float] | None = None,
             on_result: Callable[[dict[str, Any]], None] | None = None,
             on_pool: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Gate every workspace under ``root`` (``find_workspaces``); ``pool``: ``pool.options.PoolOptions`` (None or
    not wanted: one after the other in this process). Returns ``{"root", "workspaces": [per workspace, sorted:
    GateJob.run's result + "device"], "exit_code" (``worst_exit``), "passed", "pool" (``PoolRun.to_dict``, None
    without a pool)}``. UsageError (exit 2) when ``root`` holds no workspace."""
    from ascendopt.device import backends
    from ascendopt.errors import UsageError

    found = find_workspaces(root)
    if not found:
        raise UsageError(f"gate --all: no workspace (.ascendopt/ with a contract.yaml) under {root}",
                         hint="freeze a task first, or give the folder that holds them with --root")
    job = GateJob(str(root), skip_perf, pairs, timeout, accept_implausible, timer,
                  anchor_each=pool is not None and pool.wanted, specs=kernels_named(found))
    pool_run = None
    if pool is not None and pool.wanted:
        from ascendopt.pool.core import run_pool
        from ascendopt.pool.options import open_pool

        limit = job_limit(found, timeout)
        with open_pool(pool, job, backends.current().name) as devices:
            pool_run = run_pool(devices, job, [str(p) for p in found], item_s=limit, anchor_s=limit,
                                total_s=limit * (len(found) + 2),
                                on_result=lambda r, _p: on_result(r) if on_result else None, on_progress=on_pool)
        results = [pool_run.results[job.key(str(p))] for p in found if job.key(str(p)) in pool_run.results]
    else:
        results = []
        for path in found:
            result = {**job.run(str(path)), "device": None}
            results.append(result)
            if on_result:
                on_result(result)
    for r in results:
        r.setdefault("workspace", r.get("key"))
        if "exit_code" not in r:  # an item the pool could not run anywhere (pool.core: "error")
            r.update(exit_code=int(ExitCode.ENVIRONMENT), passed=False, result=None, junit=None)
    code = worst_exit([r["exit_code"] for r in results])
    return {"root": str(root), "workspaces": results, "exit_code": code, "passed": code == 0,
            "pool": pool_run.to_dict() if pool_run is not None else None}


def kernels_named(workspaces: Sequence[Path]) -> dict[str, Any]:
    """``{name: KernelSpec}`` of the bundled kernels the workspaces' contracts name (a contract that cannot be read,
    or names no bundled kernel, adds nothing: its gate says why)."""
    from ascendopt import kernels
    from ascendopt.contract.model import load_raw

    out = {}
    for path in workspaces:
        try:
            data = load_raw(Workspace(path))
            name = (data.get("workload") or {}).get("kernel") if data.get("workload", {}).get("kind") == "kernel" \
                else None
            if name:
                out[name] = kernels.get(name)
        except Exception:  # noqa: BLE001 - the workspace's own gate reports what is wrong with it
            continue
    return out


def job_limit(workspaces: Sequence[Path], timeout: float | None) -> float:
    """Seconds one workspace's gate may take on a device before the device counts as lost: what one gate's children
    may spend in all (its tests, its workload calls, its timing: ``--timeout`` for each, else the frozen defaults,
    ``DEFAULT_TIMEOUTS``, summed); the gate's own limits end a stuck child well before it."""
    from ascendopt.contract.model import DEFAULT_TIMEOUTS

    if timeout is not None:
        return float(len(DEFAULT_TIMEOUTS) * timeout)
    return float(sum(DEFAULT_TIMEOUTS.values()))


def junit(all_results: dict[str, Any]) -> str:
    """One JUnit document for the lot: each workspace's testsuite (``GateResult.to_junit``) renamed after its
    workspace, with a ``device`` property; a workspace that could not be gated is one testcase in error."""
    root = ET.Element("testsuites", name="ascendopt gate --all")
    for r in all_results["workspaces"]:
        name = f"ascendopt gate {r['workspace']}"
        suites = list(ET.fromstring(r["junit"].split("?>", 1)[-1])) if r.get("junit") else []
        if not suites:
            suite = ET.Element("testsuite", name=name, tests="1", failures="0", errors="1", skipped="0")
            case = ET.SubElement(suite, "testcase", classname="gate.workspace", name=str(r["workspace"]))
            ET.SubElement(case, "error", message=str(r.get("error") or f"exit {r['exit_code']}")[:200],
                          type=f"exit {r['exit_code']}").text = str(r.get("error") or "")
            suites = [suite]
        for suite in suites:
            suite.set("name", name)
            if r.get("device"):
                props = ET.Element("properties")
                ET.SubElement(props, "property", name="device", value=str(r["device"]))
                suite.insert(0, props)
            root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
