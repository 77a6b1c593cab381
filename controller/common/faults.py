"""Fault-injection points: where a test may kill the process, to prove a restart recovers.

`TABLECTL_FAULT_AT=NAME` (read once, at import) makes the process SIGKILL itself when it
reaches the point NAME: the power cut or `kill -9` that the crash-safety tests need at an
exact instant (between two steps of a roll-over, between a seal's commit and the new key).
Without the variable, `fault_point` is a comparison with None: production behaviour is
unchanged. Every point is listed in POINTS (and docs/journal.md, "Fault-injection points");
naming one that does not exist is refused at import, so a test cannot aim at nothing.
"""

from __future__ import annotations

import os
import signal

#: name -> where it is (docs/journal.md repeats this table).
POINTS = {
    "journal.create.before_rename": "a new journal file built (schema, fsynced), not yet renamed",
    "rollover.after_seal": "the closing segment sealed (row and key durable), nothing closed",
    "rollover.after_close": "the closing segment's WAL checkpointed and closed, mode 0400",
    "rollover.after_rename": "renamed to its closed name (directory fsynced); no live file",
    "rollover.after_create": "the new live file exists with its table, no row yet",
    "rollover.after_rows": "the new segment's first rows committed, head file not rewritten",
    "seal.after_commit": "a seal row committed, the sealing key not yet evolved",
    "key.after_new_slot": "the evolved key written and fsynced in the key file's free slot, the "
    "old key's slot not yet overwritten",
    "head.before_rename": "the head file's temporary written and fsynced, not renamed",
    "verification_key.before_rename": "the demo's verification key (the seed) in its temporary "
    "file, fsynced, not renamed",
    "retention.mid_copy": "retention's child: the first chunk (up to 1 MiB) of a closed segment "
    "written to its copy's temporary in the archive, not fsynced",
    "retention.verifying_copy": "retention's child: the copy's temporary written and fsynced, "
    "its read-back comparison with the segment begun, not finished",
    "retention.after_link": "retention's child: the verified copy linked under the segment's "
    "name in the archive (directory fsynced), its temporary name and the local segment not "
    "yet removed",
}

ENVIRONMENT = "TABLECTL_FAULT_AT"
_ARMED = os.environ.get(ENVIRONMENT) or None
if _ARMED is not None and _ARMED not in POINTS:
    raise RuntimeError(f"{ENVIRONMENT}={_ARMED!r}: no such fault point (one of {sorted(POINTS)})")


def fault_point(name: str) -> None:
    """Die here, at once and without cleaning up, when the tests armed this point."""
    if _ARMED is not None and name == _ARMED:
        os.kill(os.getpid(), signal.SIGKILL)
