"""Fake of ``torch_npu.profiler.scheduler``: ``Schedule`` (exported as ``schedule``) and ``ProfilerAction``."""

from enum import Enum

from torch_npu.profiler._record import recorded


class ProfilerAction(Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


class Schedule:
    """Per repeat: ``wait -> warmup -> active`` after ``skip_first`` steps (torch semantics, §9.5)."""

    @recorded("profiler.schedule")
    def __init__(self, wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0,
                 skip_first_wait: int = 0):
        if wait < 0 or active <= 0 or warmup < 0 or repeat < 0 or skip_first < 0:
            raise ValueError("Invalid profiler schedule arguments")
        self.wait, self.active, self.warmup = wait, active, warmup
        self.repeat, self.skip_first, self.skip_first_wait = repeat, skip_first, skip_first_wait

    def __call__(self, step: int) -> ProfilerAction:
        if step < self.skip_first:
            return ProfilerAction.NONE
        step -= self.skip_first
        cycle = self.wait + self.warmup + self.active
        if self.repeat > 0 and step // cycle >= self.repeat:
            return ProfilerAction.NONE
        mod = step % cycle
        if mod < self.wait:
            return ProfilerAction.NONE
        if mod < self.wait + self.warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    def to_dict(self) -> dict:
        return {"wait": self.wait, "active": self.active, "warmup": self.warmup, "repeat": self.repeat,
                "skip_first": self.skip_first}
