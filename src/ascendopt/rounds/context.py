"""What one command of the loop reads from the workspace, loaded once and passed down.

``optimize-round``, ``--auto``, ``reprofile``, ``report`` and the gate all need the same facts: the
contract (digest-checked), the round records, the bundled kernel's spec (or that the task is own
code), the kernel names that identify the target in a profile, and the best configuration so far.
Loading them in one place means one digest check, one registry lookup and one definition of "the best
so far" per command, whatever path the command takes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ascendopt.rounds import records as rounds
from ascendopt.rounds.records import RoundRecord, StopDecision
from ascendopt.workspace import Workspace

if TYPE_CHECKING:
    from ascendopt.contract.model import Contract
    from ascendopt.kernels.spec import KernelSpec


def kernel_names(contract: Contract) -> tuple[str, ...]:
    """Names that identify the target kernels in a profile: the frozen ``expected_kernels``, else
    (own code frozen without a profile) the contract's ``kernel_filter``."""
    if contract.expected_kernels:
        return tuple(contract.expected_kernels)
    return (contract.workload.kernel_filter,) if contract.workload.kernel_filter else ()


@dataclass(frozen=True)
class RoundContext:
    """The loop's state for one command. ``spec`` is None for own code; configurations are tunables
    (name -> int) of a bundled kernel, None for own code. The spec and the round records are read on
    first use: the gate needs no rounds, and ``report`` needs no kernel (nor triton)."""

    ws: Workspace
    contract: Contract

    @classmethod
    def load(cls, ws: Workspace, *, check_digest: bool = True) -> RoundContext:
        """Read the contract (a hand edit raises IntegrityError, exit 3, unless ``check_digest`` is off)
        and the rounds recorded so far."""
        from ascendopt.contract import model as contract_mod

        return cls.for_contract(ws, contract_mod.load(ws, check_digest=check_digest))

    @classmethod
    def for_contract(cls, ws: Workspace, contract: Contract) -> RoundContext:
        """The context of an already loaded (and checked) contract."""
        return cls(ws, contract)

    @cached_property
    def spec(self) -> KernelSpec | None:
        """The bundled kernel's spec (the kernel registry is imported here), None for own code."""
        if not self.contract.is_kernel:
            return None
        from ascendopt import kernels

        return kernels.get(self.contract.workload.kernel)

    @cached_property
    def contract_digest(self) -> str:
        """The contract's stored ``integrity.digest``: what its rounds record as ``contract_digest``."""
        from ascendopt.contract import model as contract_mod

        return contract_mod.stored_digest(contract_mod.load_raw(self.ws))

    @cached_property
    def records(self) -> tuple[RoundRecord, ...]:
        """This contract's rounds recorded so far, oldest first. Round files of another contract (after
        a re-freeze, e.g. copied back from ``archive/``) are left out with one warning naming them, so
        reports, stop criteria and the best so far count only this contract's ledger."""
        from ascendopt import console

        loaded = rounds.load_rounds(self.ws)
        if not loaded:
            return ()
        mine: list[RoundRecord] = []
        other: list[RoundRecord] = []
        for r in loaded:
            (mine if rounds.belongs_to(r, self.contract_digest, self.contract.created_at) else other).append(r)
        names = ", ".join([self.ws.round_path(r.number).name for r in other[:4]]
                          + ([f"and {len(other) - 4} more"] if len(other) > 4 else []))
        if names and names != self.__dict__.get("_ignored_warned"):  # once per command, not per reload
            self.__dict__["_ignored_warned"] = names
            console.warn(f"{self.ws.rounds_dir}: {names}: recorded under another contract (not digest "
                         f"{self.contract_digest[:12]}); ignored (`freeze --force` archives a contract's rounds "
                         f"under {self.ws.archive_dir.name}/)")
        return tuple(mine)

    @property
    def is_kernel(self) -> bool:
        return self.contract.is_kernel

    @property
    def kernel_names(self) -> tuple[str, ...]:
        return kernel_names(self.contract)

    @property
    def best_round(self) -> RoundRecord | None:
        """The latest kept round, None while the baseline is still the best."""
        return rounds.best_round(self.records)

    @property
    def baseline_config(self) -> dict[str, int] | None:
        """The frozen configuration, completed with the spec's defaults (None for own code)."""
        return self.spec.config(self.contract.workload.config) if self.spec else None

    @property
    def best_config(self) -> dict[str, int] | None:
        """The best kept round's configuration, else the baseline's (None for own code)."""
        if self.spec is None:
            return None
        best = self.best_round
        return dict(best.config) if best and best.config else dict(self.baseline_config or {})

    def candidate_config(self, overrides: dict[str, Any] | None = None) -> dict[str, int] | None:
        """The frozen configuration with ``overrides`` applied, validated by the spec (None for own code)."""
        if self.spec is None:
            return None
        return self.spec.config({**self.contract.workload.config, **(overrides or {})})

    def stop_decision(self, extra: Sequence[RoundRecord] = ()) -> StopDecision:
        """The stop criteria over the recorded rounds (plus ``extra``, e.g. a round about to be saved)."""
        return rounds.should_stop([*self.records, *extra], max_rounds=self.contract.max_rounds)

    def reloaded(self) -> RoundContext:
        """The same contract and spec with the rounds read again (after a command recorded one)."""
        fresh = RoundContext(self.ws, self.contract)
        for name in ("spec", "contract_digest", "_ignored_warned"):  # looked up (and said) once per command
            if name in self.__dict__:
                fresh.__dict__[name] = self.__dict__[name]
        return fresh
