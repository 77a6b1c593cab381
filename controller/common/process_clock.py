"""How long this process has existed: READY is reported from the process's own start (the
interpreter's start-up, the imports and the journal's verification included), as systemd and
an operator see it, not from some later point inside `run`.

The kernel's record of the start (/proc/self/stat, field 22: clock ticks after boot) against
CLOCK_BOOTTIME, both counted from boot: no wall clock, so a clock step cannot skew it.
"""

from __future__ import annotations

import os
import time

_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_started_after_boot() -> float | None:
    """Seconds after boot at which this process started (kernel ticks: 10 ms); None where
    /proc is not there to say."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            text = stat.read()
        # the command name (field 2) is in parentheses and may hold spaces: split after it
        fields = text[text.rindex(")") + 2 :].split()
        return int(fields[19]) / _TICKS_PER_SECOND  # field 22 of the whole line
    except (OSError, ValueError, IndexError):
        return None


def seconds_since_process_start() -> float | None:
    """How long ago this process started (None where /proc cannot say)."""
    started = process_started_after_boot()
    if started is None:
        return None
    return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)
