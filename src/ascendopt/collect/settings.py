"""What one profiling run is asked to do: name, metric group, level and schedule (validated)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ascendopt.collect.metrics import normalize_level, normalize_metric_group
from ascendopt.collect.names import sanitize_name
from ascendopt.errors import UsageError


@dataclass(frozen=True)
class ProfileSettings:
    """One run: ONE metric group (the profiler cannot collect two groups at once, docs/practice.md §2).

    The schedule follows torch's: per repeat ``wait -> warmup -> active`` steps after
    ``skip_first`` steps; ``steps`` (workload calls) defaults to one full cycle,
    ``skip_first + (wait + warmup + active) * repeat`` = 2 with the defaults, so the first
    (compiling) call lands in the warmup step and the second is recorded.
    """

    name: str
    metric_group: str = "PipeUtilization"
    profiler_level: str = "Level1"
    wait: int = 0
    warmup: int = 1
    active: int = 1
    repeat: int = 1
    skip_first: int = 0
    steps: int | None = None

    @classmethod
    def build(cls, *, name: str, aic_metrics: str = "PipeUtilization", profiler_level: str = "Level1",
              wait: int = 0, warmup: int = 1, active: int = 1, repeat: int = 1, skip_first: int = 0,
              steps: int | None = None) -> ProfileSettings:
        """Validate and normalize user values; every problem is a one-line UsageError."""
        for label, value, low in (("wait", wait, 0), ("warmup", warmup, 0), ("active", active, 1),
                                  ("repeat", repeat, 1), ("skip_first", skip_first, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise UsageError(f"{label}={value!r}: must be an integer >= {low}")
        cycle = skip_first + (wait + warmup + active) * repeat
        if steps is None:
            steps = cycle
        elif not isinstance(steps, int) or steps < cycle:
            # Fewer steps than one cycle means the profiler never reaches its trace-ready point.
            raise UsageError(f"steps={steps!r}: must be >= skip_first + (wait + warmup + active) * repeat = {cycle}")
        return cls(name=sanitize_name(name), metric_group=normalize_metric_group(aic_metrics),
                   profiler_level=normalize_level(profiler_level), wait=wait, warmup=warmup, active=active,
                   repeat=repeat, skip_first=skip_first, steps=steps)

    @property
    def schedule(self) -> dict[str, int]:
        return {"wait": self.wait, "warmup": self.warmup, "active": self.active, "repeat": self.repeat,
                "skip_first": self.skip_first}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProfileSettings:
        return cls(**data)
