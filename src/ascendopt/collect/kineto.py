"""Keep libkineto's own log lines off the user's terminal.

torch's profiler (libkineto, C++) logs lines such as ``USDT:2026-12-02 05:42:26 6459:6459
SyncActivityProfilerHandler.cpp:52] profiler_start`` to stderr when a profile starts and stops; they
are buffered and flushed at some later point, so they land in the middle of the progress line.
Their level (USDT) is kineto's highest below 6; ``KINETO_LOG_LEVEL`` is read when kineto first
starts a profile in the process, so this must run before the first profile (checked on torch 2.13).
"""

from __future__ import annotations

import os

QUIET_LEVEL = "6"  # above kineto's USDT level (5): only what kineto would log above it stays


def silence_kineto_log() -> None:
    """Raise kineto's log level for this process and its children, unless the user set one."""
    os.environ.setdefault("KINETO_LOG_LEVEL", QUIET_LEVEL)
