"""READY is reported from the process's start (issue 33, step 5): the interpreter's start-up,
the imports and the journal's verification are part of the figure the daemon logs and
`tablectl demo` prints, as systemd sees the start; before, it counted from inside `run`."""

from __future__ import annotations

from pathlib import Path

from tests.journal.crashing import log_of
from tests.journal.history import build_history, start_daemon, write_config


def test_the_ready_figure_counts_from_the_process_start(tmp_path: Path):
    config = write_config(tmp_path / "t")
    build_history(config, 200)
    started = start_daemon(config, timeout=60)
    measured = started.ready_seconds  # from the test's Popen to READY=1 on its socket
    assert measured is not None, started.stop()
    assert started.stop() == 0
    (ready,) = [e for e in log_of(started) if e["event"] == "ready"]
    reported = float(ready["seconds"])
    # the kernel counts a start in 10 ms ticks; the test's figure also holds the fork and the
    # notification's trip: the reported figure is within those of it, never a fraction of it
    assert 0.8 * measured - 0.05 <= reported <= measured + 0.05, (reported, measured)
    assert float(ready["since_run_seconds"]) < reported
