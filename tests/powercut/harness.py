"""Power cuts of a real table: the demo's daemon on lossyfs, cut, remounted, restarted, checked.

A `PoweredTable` is one game's table whose state directory (journal, its head file, the
sealing key, the device links and the operator socket) is on a lossyfs mount
(tests/powercut/lossyfs.py). Its daemon is `tablectl demo --fast` run by
tests/powercut/player.py, which keeps its record of acknowledged events and of the devices'
holds on the real disk, off the mount.

A cut (`cut_once`) is one of `TRIGGERS`: at a random instant, or armed in lossyfs at an
operation of a write site (the sealing key's replacement, the head file's, the WAL's fsync,
a directory fsync, the roll-over's rename), before or after it. The daemon is SIGKILLed by
lossyfs at the instant it drops the unsynced writes. Then the mount is remounted on what
survived, the daemon restarted, and `check` holds the table to its promises:

1. the daemon starts again (READY) on what survived;
2. every event it acknowledged before the cut is in the journal (all its segments);
3. `tablectl journal verify DIR --verify-key KEY` exits 0: the chain and the seals verify;
4. before its first round, the daemon's device holds are those the journal gives (the last
   checkpoint's `interlocks`, then every decision and event after it, folded as a restart
   folds them), and the simulated shoe and shuffler are locked exactly when held;
5. the restarted table makes progress: its dealer plays a whole round after the restart (a
   table the restart left unable to deal, or whose dealer cannot do what the table then asks,
   is a finding, not a run of cuts that each see a handful of events);
6. no temporary file of any durable write path (every name of the product's registry,
   controller/record/durable.py TEMPORARY_PATTERNS) is left behind by the restart, and
   the sealing key file holds one key only (the slot of the key it replaced overwritten).

Each failure is a `Finding` naming the cut, so a run reports them all rather than the first.

A table may run its daemon as an unprivileged user (`user`: the package's `tablectl` user, else
`nobody`, through setpriv with the unit's UMask=0077), its state directory 0700 and every file
in it owned by that user, as the unit's StateDirectory= leaves them; lossyfs then mounts with
`allow_other` and the kernel checks each access against the modes and owners it reports.

Every cut made in a session is tallied by mode and site (`tally`), printed at the session's
end and written beside its temporary directories (tests/powercut/conftest.py).
"""

from __future__ import annotations

import datetime
import json
import os
import random
import select
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tablectl.controller.record import merkle
from tablectl.controller.record.checkpoints import (
    IDENTITY_KEY_NAME,
    default_origin,
    read_checkpoint_file,
)
from tablectl.controller.record.durable import is_stale_temporary
from tablectl.controller.record.journal import (
    GAP_LEAF,
    JournalError,
    live_segments,
    read_rows,
    verify_journal,
)
from tablectl.controller.record.merkle_log import MerkleLog
from tablectl.controller.record.note import NoteError, create_identity_key
from tablectl.controller.record.sealing import KEY_FILE_SIZE, VerificationKey, setup_keys
from tablectl.controller.service.daemon import Interlocks
from tests.journal.history import ServiceUser
from tests.journal.service_user import hand_over
from tests.powercut.lossyfs import LossyMount
from tests.powercut.player import event_digest

T = TypeVar("T")

#: every table made in this session, for the tally of its cuts (`tally`)
TABLES: list[PoweredTable] = []

ROOT = Path(__file__).resolve().parents[2]
GAMES = ("three_card_21", "five_card_hilo", "heads_up_holdem", "asia_poker")
READY_TIMEOUT = 30.0
#: seconds an armed cut may wait for its operation before the power is cut anyway
ARMED_PATIENCE = 6.0
SEAL_INTERVAL = 2  # seconds: short epochs, so seals happen all the time
#: seconds a restarted table may take to play its first whole round (under load: generous; a
#: stalled demo dealer gives up after its own 20 s wait and exits "stuck" before this)
PROGRESS_TIMEOUT = 60.0


@dataclass(frozen=True)
class Trigger:
    """Where a cut lands: `ops` on a path matching `path` (lossyfs `arm`), or a random instant
    (`ops` empty). `nth` is drawn from 1..`nth_max`."""

    name: str
    ops: tuple[str, ...] = ()
    path: str = ""
    when: str = "before"
    nth_max: int = 1


TRIGGERS: tuple[Trigger, ...] = (
    Trigger("at a random instant"),
    Trigger("at a random instant (early)"),
    Trigger(
        "a seal: the evolved key written into the key file's free slot, before its fsync",
        ("fsync",),
        r"/sealing-key$",
    ),
    Trigger(
        "a seal: the evolved key's slot fsynced, the old key's slot not yet overwritten",
        ("fsync",),
        r"/sealing-key$",
        "after",
    ),
    Trigger(
        "a seal: before the key file's 1st or 2nd fsync (the new key's slot, the old one's wipe)",
        ("fsync",),
        r"/sealing-key$",
        nth_max=2,
    ),
    Trigger(
        "the head file (checkpoint, seal): before its rename",
        ("rename",),
        r"journal\.sqlite\.head\.\d+\.tmp",
        nth_max=4,
    ),
    Trigger(
        "the head file (checkpoint, seal): after its temporary file is fsynced",
        ("fsync",),
        r"journal\.sqlite\.head\.\d+\.tmp",
        "after",
        nth_max=4,
    ),
    Trigger(
        "a commit: before the WAL's fsync",
        ("fsync",),
        r"journal\.sqlite-wal$",
        nth_max=60,
    ),
    Trigger(
        "a commit: after the WAL's fsync",
        ("fsync",),
        r"journal\.sqlite-wal$",
        "after",
        nth_max=60,
    ),
    Trigger("a directory fsync", ("fsyncdir",), r"/state$", nth_max=6),
)

ROLLOVER_TRIGGERS: tuple[Trigger, ...] = (
    Trigger(
        "the roll-over: before the live segment's rename",
        ("rename",),
        r"/journal-\d{4}-\d\d-\d\d-\d{12}\.sqlite$",
    ),
    Trigger(
        "the roll-over: after the live segment's rename",
        ("rename",),
        r"/journal-\d{4}-\d\d-\d\d-\d{12}\.sqlite$",
        "after",
    ),
    # the new segment is built under a temporary name and renamed into place
    # (journal.create_journal_file): a `create` armed on `journal.sqlite` itself never fires
    Trigger(
        "the roll-over: creating the new segment", ("create",), r"/state/\.journal\.sqlite\.new$"
    ),
    Trigger(
        "the roll-over: the new segment's build renamed into place",
        ("rename",),
        r"/state/\.journal\.sqlite\.new -> ",
    ),
    Trigger(
        "the roll-over: the new segment's first commit",
        ("fsync",),
        r"/state/journal\.sqlite-wal$",
        nth_max=3,
    ),
    Trigger("the roll-over: the closed segment's chmod", ("chmod",), r"/state/journal\.sqlite$"),
)


@dataclass(frozen=True)
class Floor:
    """A floor store the table ships its journal to: a throwaway PostgreSQL's database with
    the schema and this table's INSERT-only role (its password in `passfile`)."""

    admin_dsn: str
    table_dsn: str
    passfile: Path
    table_id: str = "demo"  # the demo's table id


@dataclass
class Finding:
    game: str
    cut: int
    trigger: str
    what: str

    def __str__(self) -> str:
        return f"{self.game} cut {self.cut} ({self.trigger}): {self.what}"


@dataclass
class CutRecord:
    game: str
    number: int
    trigger: str  # the site and what came of it (a trigger that did not fire says so)
    fired: bool  # the armed operation came (False: cut at the patience's end)
    dropped_files: int
    dropped_dirs: int
    dropped_blocks: int
    acknowledged: int  # events acknowledged before this cut, in all
    #: what the cut dropped: files with unsynced bytes and directories with unsynced entries
    dropped: tuple[str, ...] = ()
    #: partial persistence: the seed and what survived of each ("k/n": the first k of n
    #: unsynced changes, a torn write's blocks), by path; empty when every change was dropped
    kept: dict[str, Any] = field(default_factory=dict)
    #: the trigger's name (the tally's site) and the table's mode (`PoweredTable.mode`)
    site: str = ""
    mode: str = ""
    #: the check after this cut: the acknowledged events it looked for in the journal and the
    #: ones it found missing (None: not checked, e.g. the daemon did not start again)
    looked_for: int | None = None
    lost: int | None = None

    @property
    def dropped_beyond_shm(self) -> list[str]:
        """What the cut dropped besides a `-shm` file (SQLite never fsyncs it, so it is
        dropped at every cut: proof of nothing)."""
        return [name for name in self.dropped if not name.endswith("-shm")]


@dataclass
class PoweredTable:
    game: str
    base: Path
    seed: int = 1
    faketime: dict[str, str] = field(default_factory=dict)
    ext4: bool = False  # lossyfs's ext4-like mode: a file's fsync carries every entry
    #: lossyfs's partial persistence (a random prefix of each file's and directory's unsynced
    #: changes survives a cut), drawn from this seed, a new one at each remount; None: a cut
    #: drops every unsynced change
    partial: int | None = None
    pause: float = 0.0  # the dealer's seconds between rounds (player.py --pause)
    group_commit: bool = False  # player.py --group-commit: acknowledgements before the fsync
    #: the daemon run as this unprivileged user (tests/journal/service_user.py); None: as root
    user: ServiceUser | None = None
    floor: Floor | None = None  # the journal shipped there (the demo's --floor-dsn)
    cuts: list[CutRecord] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.mount = LossyMount(
            self.base / "disk",
            self.base / "mnt",
            ext4=self.ext4,
            partial=self.partial,
            allow_other=self.user is not None,
        )
        self.state = self.mount.mountpoint / "state"
        self.acks = self.base / "acks.jsonl"
        self.log = self.base / "daemon.log"
        self.output = self.base / "player.out"
        self.process: subprocess.Popen[str] | None = None
        self.acks_offset = 0
        self.trigger = "first start"
        self.stuck: str | None = None
        #: the state directory on the disk after the last roll-over cut: file name -> mode
        self.after_cut: dict[str, int] = {}
        #: the floor checks made: (cut, rows on the floor, events on the floor)
        self.floor_checks: list[tuple[int, int, int]] = []
        #: with a floor, at each cut: (cut, the floor's head, the last row the cut left in the
        #: journal): a head behind it is a cut with rows committed and not yet on the floor
        self.at_cut: list[tuple[int, int, int]] = []
        TABLES.append(self)

    @property
    def mode(self) -> str:
        """lossyfs's mode and who runs the daemon: the tally's first key."""
        mode = (
            "partial persistence"
            if self.partial is not None
            else "ext4-like"
            if self.ext4
            else "strict POSIX"
        )
        mode += ", the service user" if self.user is not None else ", root"
        if self.floor is not None:
            mode += ", shipping to a floor"
        if self.group_commit:  # acknowledgements before the fsync: the proof a check can fail
            mode += ", group commit (a proof: must lose)"
        return mode

    # -- life cycle ----------------------------------------------------------------------------

    def install(self, now: float | None = None) -> None:
        """The state directory and its sealing key, as `journal setup-keys --interval 2` leaves
        them on a table PC before the first start (made durable: on the disk itself)."""
        (self.mount.backing / "state").mkdir(parents=True, exist_ok=True)
        self.key: VerificationKey = setup_keys(
            self.mount.backing / "state" / "sealing-key", interval=SEAL_INTERVAL, now=now
        )
        (self.base / "verification-key").write_text(f"{self.key}\n")
        # the identity key: the daemon signs its Merkle log's checkpoints
        self.identity = create_identity_key(
            self.mount.backing / "state" / IDENTITY_KEY_NAME, default_origin("powercut")
        )
        if self.user is not None:
            # the unit's StateDirectory= (0700, the user's) with its keys the user's, 0600; the
            # player's records (off the mount) the user's to append to
            self.mount.backing.chmod(0o755)
            hand_over(self.mount.backing / "state", self.user)
            for record in (self.acks, self.log):
                record.touch(mode=0o600)
                os.chown(record, self.user.uid, self.user.gid)
        self.mount.mount()

    def start(self, arm: Trigger | None = None, nth: int = 1) -> str | None:
        """Start the daemon; None once READY, or why it did not start. `arm`: a cut armed as
        the process starts (before the daemon opens its journal)."""
        self.acks_offset = self.acks.stat().st_size if self.acks.exists() else 0
        env = {**os.environ, **self.faketime}
        python, prefix = sys.executable, ()
        if self.user is not None:
            # the system Python with this checkout on its path; a preload (libfaketime) goes in
            # after the change of user (tests/journal/history.py says why)
            env = {
                **self.user.environment(),
                **self.faketime,
                "PYTHONPATH": f"{ROOT}:{self.user.path}",
            }
            preload = env.pop("LD_PRELOAD", None)
            python = self.user.python
            prefix = (*self.user.prefix(), *(("env", f"LD_PRELOAD={preload}") if preload else ()))
        out = open(self.output, "a")  # noqa: SIM115 (the child's stdout, closed below)
        self.process = subprocess.Popen(
            [
                *prefix,
                python,
                "-m",
                "tests.powercut.player",
                "--game",
                self.game,
                "--state-dir",
                str(self.state),
                "--acks",
                str(self.acks),
                "--log",
                str(self.log),
                "--seed",
                str(self.seed),
                "--pause",
                str(self.pause),
                *(["--group-commit"] if self.group_commit else []),
                *(
                    [
                        "--floor-dsn",
                        self.floor.table_dsn,
                        "--floor-passfile",
                        str(self.floor.passfile),
                    ]
                    if self.floor is not None
                    else []
                ),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=out,
            text=True,
            umask=0o077 if self.user is not None else -1,  # the unit's UMask=
        )
        out.close()
        self.seed += 1
        if arm is not None:
            self.mount.arm(list(arm.ops), arm.path, nth=nth, when=arm.when, kill=self.process.pid)
        assert self.process.stdout is not None
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], 0.1)
            if ready:
                line = self.process.stdout.readline()
                if line.strip() == "ready":
                    return None
                if not line:
                    break
        code = self.process.poll()
        if code is None:
            self.process.kill()
            code = self.process.wait(10)
        self.process = None
        tail = self.output.read_text(errors="replace")[-600:] if self.output.exists() else ""
        return f"the daemon did not start (exit {code}): {tail.strip()}"

    def cut_once(
        self, number: int, trigger: Trigger, rng: random.Random, patience: float = ARMED_PATIENCE
    ) -> CutRecord | None:
        """One power cut at `trigger`; the daemon killed by lossyfs at the instant of the cut.

        None when the demo's dealer got stuck before the cut: after a restart the simulated
        devices are new processes that forgot their cards (a real shoe keeps them), so Three
        Card 21's six-deck shoe may deal a card its ledger says was dealt; the daemon rightly
        voids the round and removes the deck (C8), and the demo's dealer, which never brings
        a new deck, cannot go on. The table is then replaced by a fresh one.
        """
        assert self.process is not None
        pid = self.process.pid
        fired = True
        if trigger.ops:
            nth = rng.randint(1, trigger.nth_max)
            self.mount.arm(list(trigger.ops), trigger.path, nth=nth, when=trigger.when, kill=pid)
            try:
                self.process.wait(patience)
            except subprocess.TimeoutExpired:
                fired = False
                self.mount.cut(kill=pid)
        else:
            early = "early" in trigger.name
            time.sleep(rng.uniform(0.0, 0.3) if early else rng.uniform(0.3, 2.5))
            self.mount.cut(kill=pid)
        code = self.process.wait(10)
        self._drain()
        self.process = None
        if not self.mount.cuts():  # it ended by itself before the power went
            self.mount.cut()
            tail = self.output.read_text(errors="replace")[-1500:].strip()
            stuck = [line for line in tail.splitlines() if "the dealer is stuck" in line]
            if stuck:  # the demo's dealer cannot go on (below): no cut, a limitation
                self.stuck = stuck[-1]
                return None
            self.trigger = trigger.name
            self.fail(number, f"the daemon exited {code} by itself before the cut: {tail}")
        (cut,) = self.mount.cuts()
        said = trigger.name + ("" if fired else " (did not come: cut anyway)")
        return self.record_cut(number, trigger, fired, said, cut)

    def record_cut(
        self, number: int, trigger: Trigger, fired: bool, said: str, cut: dict[str, Any]
    ) -> CutRecord:
        """The cut lossyfs made (its answer `cut`) at `trigger`, described as `said`."""
        dropped = cut["dropped"] or {"files": [], "directories": [], "blocks": 0}
        record = CutRecord(
            self.game,
            number,
            said,
            fired,
            len(dropped["files"]),
            len(dropped["directories"]),
            int(dropped["blocks"]),
            len(self.acknowledged()),
            (*dropped["files"], *dropped["directories"]),
            cut.get("kept") or {},
            site=trigger.name,
            mode=self.mode,
        )
        self.cuts.append(record)
        self.trigger = record.trigger
        return record

    def remount(self) -> None:
        """The disk mounted again on what survived; in partial mode with the next seed."""
        if self.mount.partial is not None:
            self.mount.partial += 1
        self.mount.remount()

    def _drain(self) -> None:
        if self.process is not None and self.process.stdout is not None:
            with open(self.output, "a") as out:
                out.write(self.process.stdout.read())
            self.process.stdout.close()

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self._drain()
            self.process = None
        self.mount.unmount()

    # -- the checks -----------------------------------------------------------------------------

    def fail(self, number: int, what: str) -> None:
        self.findings.append(Finding(self.game, number, self.trigger, what))

    def acknowledged(self) -> list[str]:
        if not self.acks.exists():
            return []
        lines = self.acks.read_text().splitlines()
        return [json.loads(line)["ack"] for line in lines if '"ack"' in line]

    def journaled(self) -> set[str]:
        found: set[str] = set()
        for path in live_segments(self.state / "journal.sqlite"):
            for row in read_rows(path):
                if row.kind == "event":
                    found.add(event_digest(row.body))
        return found

    def acknowledged_since_start(self) -> int:
        """Events the running daemon has acknowledged since its start."""
        if not self.acks.exists():
            return 0
        with open(self.acks) as acks:
            acks.seek(self.acks_offset)
            return sum(1 for line in acks if '"ack"' in line)

    def wait_for_acknowledgements(self, count: int, timeout: float = 20.0) -> bool:
        """Whether the running daemon acknowledged `count` events since its start in time."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.acknowledged_since_start() >= count:
                return True
            if self.process is None or self.process.poll() is not None:
                return False
            time.sleep(0.01)
        return False

    def holds_line(self, timeout: float = 20.0) -> dict[str, Any] | None:
        """The first holds line the restarted daemon's player wrote."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.acks) as acks:
                acks.seek(self.acks_offset)
                for line in acks:
                    if line.startswith('{"devices"'):
                        entry: dict[str, Any] = json.loads(line)
                        return entry
            if self.process is None or self.process.poll() is not None:
                return None
            time.sleep(0.05)
        return None

    def holds_from_journal(self, last_seq: int) -> dict[str, list[str]]:
        """The holds a restart would restore from the journal's rows up to `last_seq`."""
        # every segment, in seq order: a roll-over may have closed the file that holds them
        # (and, between its rename and the new live file, there is no journal.sqlite at all)
        rows = sorted(
            (
                r
                for path in live_segments(self.state / "journal.sqlite")
                for r in read_rows(path)
                if r.seq <= last_seq
            ),
            key=lambda r: r.seq,
        )
        checkpoints = [i for i, r in enumerate(rows) if r.kind == "checkpoint"]
        interlocks = Interlocks()
        start = 0
        if checkpoints:
            start = checkpoints[-1]
            held = rows[start].body.get("interlocks", {})
            interlocks.shoe = set(held.get("shoe_locked", ()))
            interlocks.shuffler = set(held.get("shuffler_deck_locked", ()))
            start += 1
        event: dict[str, Any] | None = None
        decisions: list[dict[str, Any]] = []
        for row in rows[start:]:
            if row.kind == "event":
                if event is not None:
                    interlocks.lift(event, decisions)
                event, decisions = row.body, []
            elif row.kind == "decision":
                decisions.append(row.body)
                interlocks.hold(row.body)
        if event is not None:
            interlocks.lift(event, decisions)
        return interlocks.as_dict()

    def verify(self, *, command: bool = True) -> tuple[int, str]:
        """`tablectl journal verify DIR --verify-key KEY` (`command`), or the function it runs
        (`verify_journal`, in this process: the same verdict without a Python start)."""
        if not command:
            result = verify_journal(self.state, verification_key=self.key)
            return result.exit_code, result.message.replace("\n", " | ")
        verified = subprocess.run(
            [
                sys.executable,
                "-m",
                "tablectl.controller",
                "journal",
                "verify",
                str(self.state),
                "--verify-key",
                str(self.key),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        said = (verified.stdout + verified.stderr).strip().replace("\n", " | ")
        return verified.returncode, said

    def merkle_problem(self) -> str | None:
        """The Merkle log read back from the segments is the tree of the rows themselves, and
        the newest signed checkpoint covers only rows that survived the cut, with their root."""
        live = self.state / "journal.sqlite"
        try:  # read first: the daemon runs on, so the rows read after cover it
            signed = read_checkpoint_file(live, self.identity.verifier)
        except NoteError as error:
            return f"the signed checkpoint does not verify: {error}"
        with MerkleLog(live) as log:
            size = log.size()  # the daemon runs on: rows after this one are not compared
            leaves = [log.leaf(seq) for seq in range(1, size + 1)]
            rows = self.journal_row_hashes()
            # a seq the journal skipped (a cut tail continued after) is a gap leaf
            expected = [
                merkle.leaf_hash(bytes.fromhex(rows[seq])) if seq in rows else GAP_LEAF
                for seq in range(1, size + 1)
            ]
            if expected != leaves:
                first = next(
                    seq for seq in range(1, size + 1) if expected[seq - 1] != leaves[seq - 1]
                )
                return f"the Merkle log's leaf {first - 1} is not row {first}'s hash"
            if log.root(size) != merkle.root_of(leaves):
                return f"the Merkle log's stored nodes do not give the rows' tree of {size}"
            if signed is None:
                return None
            if signed.size > size:
                return f"the signed checkpoint covers {signed.size} rows, the journal holds {size}"
            if merkle.root_of(leaves[: signed.size]) != signed.root:
                return f"the signed checkpoint of {signed.size} rows is not the journal's tree"
        return None

    def journal_row_hashes(self) -> dict[int, str]:
        hashes: dict[int, str] = {}
        for path in live_segments(self.state / "journal.sqlite"):
            hashes.update((row.seq, row.hash) for row in read_rows(path))
        return hashes

    @staticmethod
    def _settled(read: Callable[[], T]) -> T:
        """`read()` of the running daemon's journal, tried again when a file it listed was
        renamed under it (a roll-over closing the live segment between the listing and the
        read): three tries, 0.2 s apart."""
        for _ in range(2):
            try:
                return read()
            except JournalError:
                time.sleep(0.2)
        return read()

    def check(self, number: int, *, command: bool = True) -> None:
        """After a restart: the promises above, each failure a Finding."""
        acknowledged = self.acknowledged()  # read before the journal: all committed by then
        try:
            journaled = self._settled(self.journaled)
        except JournalError as error:
            self.fail(number, f"the journal cannot be read: {error}")
            return
        lost = [digest for digest in acknowledged if digest not in journaled]
        for cut in self.cuts:
            if cut.number == number:
                cut.looked_for, cut.lost = len(acknowledged), len(lost)
        if lost:
            self.fail(number, f"{len(lost)} of {len(acknowledged)} acknowledged events lost")
        code, said = self.verify(command=command)
        if code != 0:
            said = said.replace(f"{self.state}: ", "")
            self.fail(number, f"journal verify --verify-key exits {code}: {said}")
        problem = self._settled(self.merkle_problem)
        if problem is not None:
            self.fail(number, problem)
        # every temporary name the product uses (its registry), not only `.tmp` ones; the
        # restarted daemon's own write in flight (a checkpoint it signs now) is not a leftover
        for leftover in sorted(p.name for p in self.state.iterdir() if is_stale_temporary(p.name)):
            self.fail(number, f"temporary file left after the restart: {leftover}")
        slots = held_key_slots(self.state / "sealing-key")
        if slots != 1:
            self.fail(number, f"the sealing key file holds {slots} keys after the restart")
        holds = self.holds_line()
        if holds is None:
            self.fail(number, "the restarted daemon played no round (no holds recorded)")
            return
        expected = self._settled(lambda: self.holds_from_journal(int(holds["last_seq"])))
        if holds["holds"] != expected:
            self.fail(number, f"the daemon holds {holds['holds']}, the journal gives {expected}")
        devices = holds["devices"]
        if devices["shoe"] != bool(expected["shoe_locked"]):
            self.fail(number, f"the shoe is locked={devices['shoe']}, the journal holds {expected}")
        if devices["shuffler"] and not expected["shuffler_deck_locked"]:
            self.fail(number, f"the shuffler's deck is locked, the journal holds {expected}")
        stalled = self.stalled(int(holds["last_seq"]))
        if stalled is not None:
            self.fail(number, stalled)

    def holds_lines_since_start(self) -> int:
        """The holds lines the running daemon's player wrote (one before each round)."""
        with open(self.acks) as acks:
            acks.seek(self.acks_offset)
            return sum(1 for line in acks if line.startswith('{"devices"'))

    def stalled(self, seq_at_start: int) -> str | None:
        """Why the restarted table made no progress, or None once its dealer has played a
        whole round since the restart (a second holds line: the first round's end). The one
        stop that is the demo's limitation, not the table's (`cut_once`): a deck removed (C8,
        a card the restarted simulated shoe forgot was dealt) that the demo's dealer cannot
        replace; any other stop names the journal's last decisions since the restart."""
        deadline = time.monotonic() + PROGRESS_TIMEOUT
        while time.monotonic() < deadline:
            if self.holds_lines_since_start() >= 2:
                return None
            if self.process is None or self.process.poll() is not None:
                break
            time.sleep(0.05)
        if self.holds_lines_since_start() >= 2:
            return None
        rows = self._settled(
            lambda: sorted(
                (
                    r
                    for path in live_segments(self.state / "journal.sqlite")
                    for r in read_rows(path)
                    if r.seq > seq_at_start and r.kind == "decision"
                ),
                key=lambda r: r.seq,
            )
        )
        said = [f"{r.body.get('rule_id')}:{r.body.get('decision')}" for r in rows]
        if (
            self.process is not None
            and self.process.poll() is not None
            and "remove_deck" in {r.body.get("decision") for r in rows}
        ):
            return None  # the demo dealer's known limit: cut_once takes a fresh table
        reasons = sorted(
            {str(r.body.get("reason")) for r in rows if r.body.get("decision") == ("deal_blocked")}
        )
        return (
            f"the table made no progress after the restart: no round played in "
            f"{PROGRESS_TIMEOUT:.0f} s (decisions since: {said[-6:]}"
            + (f"; deal_blocked: {reasons}" if reasons else "")
            + ")"
        )

    def floor_rows(self) -> list[tuple[int, str, str, str]]:
        """The floor's copy of this table: (seq, kind, body, hash) in seq order."""
        from tablectl.controller.floor.store import connect, table_rows_sql

        assert self.floor is not None
        with connect(self.floor.admin_dsn) as conn:
            source, where, params = table_rows_sql(conn, self.floor.table_id)
            rows = conn.execute(
                f"SELECT r.seq, r.kind, r.body, r.hash FROM {source} WHERE {where} ORDER BY r.seq",
                params,
            ).fetchall()
        return [(int(seq), kind, body, digest) for seq, kind, body, digest in rows]

    def floor_head(self) -> int:
        """The last seq the floor holds of this table (0: none)."""
        rows = self.floor_rows()
        return rows[-1][0] if rows else 0

    def note_the_cut(self, number: int) -> None:
        """Right after a cut (the daemon dead, its shipper with it): the floor's head and the
        last row that survived on the disk; `check_floor` then wants the rows between shipped
        by the restarted daemon, each once."""
        survived = [
            row.seq
            for path in live_segments(self.mount.backing / "state" / "journal.sqlite")
            for row in read_rows(path)
        ]
        self.at_cut.append((number, self.floor_head(), max(survived, default=0)))

    def floor_caught_up(self, seq: int, timeout: float = 90.0) -> bool:
        """Whether the floor holds row `seq` of this table in time (the shipper runs on)."""
        from tablectl.controller.floor.store import connect, table_rows_sql

        assert self.floor is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with connect(self.floor.admin_dsn) as conn:
                source, where, params = table_rows_sql(conn, self.floor.table_id, after=seq - 1)
                if conn.execute(f"SELECT 1 FROM {source} WHERE {where} LIMIT 1", params).fetchone():
                    return True
            if self.process is None or self.process.poll() is not None:
                return False
            time.sleep(0.2)
        return False

    def check_floor(self, number: int) -> None:
        """After a restart, with a floor: once the floor has caught up with the journal's last
        row (read now), every row on it is the journal's row of that seq (no row the cut took
        from the journal is on the floor), every acknowledged event is on it, none twice, and
        the floor's own verify of the table passes."""
        from tablectl.controller.floor.store import connect, verify_table

        assert self.floor is not None
        journal = self._settled(self.journal_row_hashes)
        last = max(journal)
        if not self.floor_caught_up(last):
            self.fail(number, f"the floor did not reach row {last} of the journal")
            return
        journal = self._settled(self.journal_row_hashes)
        rows = self.floor_rows()
        differ = [seq for seq, _kind, _body, digest in rows if journal.get(seq, digest) != digest]
        if differ:
            self.fail(number, f"floor rows {differ[:5]} differ from the journal's rows")
        bodies = [body for _seq, kind, body, _hash in rows if kind == "event"]
        twice = len(bodies) - len(set(bodies))
        if twice:
            self.fail(number, f"{twice} events are on the floor twice")
        # every event acknowledged before the cut is in the journal's rows up to `last` (or the
        # journal check failed already) and so on the floor, by its row's hash, once it caught
        # up with them (the floor's body text is its own: the row's hash names it)
        before = next((c.acknowledged for c in self.cuts if c.number == number), 0)
        hash_of = {
            event_digest(row.body): row.hash
            for path in live_segments(self.state / "journal.sqlite")
            for row in read_rows(path)
            if row.kind == "event"
        }
        on_floor = {digest for _seq, _kind, _body, digest in rows}
        missing = [d for d in self.acknowledged()[:before] if hash_of.get(d) not in on_floor]
        if missing:
            self.fail(number, f"{len(missing)} acknowledged events are not on the floor")
        seqs = [seq for seq, _kind, _body, _hash in rows]
        for cut, head, survived in self.at_cut:
            if cut != number:
                continue
            # the rows in flight at the cut (in the journal, not on the floor): each on the
            # floor once now, shipped by the restarted daemon
            wanted = range(head + 1, survived + 1)
            counts = {seq: seqs.count(seq) for seq in wanted}
            wrong = {seq: n for seq, n in counts.items() if n != 1}
            if wrong:
                self.fail(number, f"rows in flight at the cut not on the floor once: {wrong}")
        with connect(self.floor.admin_dsn) as conn:
            verified = verify_table(conn, self.floor.table_id, from_start=True)
        if verified.exit_code != 0:
            self.fail(number, f"floor verify: {verified.message}")
        self.floor_checks.append((number, len(rows), len(bodies)))


def play_with_cuts(
    game: str,
    base: Path,
    cuts: int,
    rng: random.Random,
    triggers: tuple[Trigger, ...],
    *,
    ext4: bool = False,
    partial: bool = False,
    command: bool = True,
    user: ServiceUser | None = None,
) -> list[PoweredTable]:
    """`cuts` power cuts, each followed by a restart and the checks (the verify command after
    each cut when `command`, else its function, and the command at each table's end). A table
    whose demo dealer got stuck (`PoweredTable.cut_once`) is followed by a fresh one."""
    tables: list[PoweredTable] = []
    done = 0
    while done < cuts and len(tables) < cuts:
        table = PoweredTable(
            game,
            base / f"table{len(tables)}",
            seed=rng.randrange(1, 2**31),
            ext4=ext4,
            partial=rng.randrange(1, 2**31) if partial else None,
            user=user,
        )
        tables.append(table)
        table.install()
        try:
            why = table.start()
            if why is not None:
                table.fail(0, why)
                return tables
            for number in range(1, cuts - done + 1):
                if table.cut_once(number, rng.choice(triggers), rng) is None:
                    break
                done += 1
                table.remount()
                why = table.start()
                if why is not None:
                    table.fail(number, why)
                    return tables
                table.check(number, command=command or done == cuts)
        finally:
            table.stop()
    return tables


FIRST_START_TRIGGERS: tuple[Trigger, ...] = (
    Trigger(
        "the first start: a commit's WAL fsync",
        ("fsync",),
        r"/state/journal\.sqlite-wal$",
        nth_max=2,
    ),
    Trigger(
        "the first start: after a commit's WAL fsync",
        ("fsync",),
        r"/state/journal\.sqlite-wal$",
        "after",
        nth_max=2,
    ),
    Trigger("the first start: a directory fsync", ("fsyncdir",), r"/state$", nth_max=2),
    Trigger(
        "the first start: the journal's creation", ("create",), r"/state/\.journal\.sqlite\.new$"
    ),
    Trigger(
        "the first start: the journal's build renamed into place",
        ("rename",),
        r"/state/\.journal\.sqlite\.new -> ",
    ),
)


def cut_at_the_first_start(
    game: str, base: Path, trigger: Trigger, nth: int, user: ServiceUser | None = None
) -> PoweredTable:
    """A cut while the daemon opens a new journal for the first time (its `nth` operation
    matching `trigger`); then a restart and the checks."""
    table = PoweredTable(game, base, user=user)
    table.install()
    try:
        why = table.start(arm=trigger, nth=nth)
        fired = why is not None and "exit -9" in why
        if why is None:  # READY before the operation came: cut now
            assert table.process is not None
            table.mount.cut(kill=table.process.pid)
            table.process.wait(10)
            table._drain()
            table.process = None
        (cut,) = table.mount.cuts()
        said = f"{trigger.name} #{nth}" + ("" if fired else " (READY first)")
        table.record_cut(1, trigger, fired, said, cut)
        table.mount.remount()
        why = table.start()
        if why is not None:
            table.fail(1, why)
            return table
        table.check(1)
    finally:
        table.stop()
    return table


#: seconds from the table's install to 06:00 on its clock: a loaded start fits in it; the cut
#: is armed at READY and waits for the roll-over's operation (before 06:00 none comes)
ROLLOVER_LEAD = 25.0


def faketime_before_six(lead_seconds: float) -> tuple[dict[str, str], float]:
    """libfaketime's environment for a daemon whose UTC clock reads 06:00 (the default gaming
    day's start) `lead_seconds` from now, and runs on; and that fake now (for the key). A
    fixed offset (FAKETIME): a clock file re-read at every reading let a row be stamped with
    the real clock now and then, which the seals then refused."""
    found = sorted(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"))
    if not found:
        raise FileNotFoundError("libfaketime (Debian's faketime) is missing")
    now = datetime.datetime.now(datetime.UTC)
    six = now.replace(hour=6, minute=0, second=0, microsecond=0)
    if six <= now:
        six += datetime.timedelta(days=1)
    offset = int((six - now).total_seconds() - lead_seconds)
    env = {"LD_PRELOAD": str(found[0]), "FAKETIME": f"+{offset}", "TZ": "UTC"}
    return env, time.time() + offset


def cut_in_a_rollover(
    game: str,
    base: Path,
    trigger: Trigger,
    rng: random.Random,
    number: int = 1,
    user: ServiceUser | None = None,
) -> PoweredTable:
    """A fresh table whose clock reaches 06:00 ROLLOVER_LEAD seconds after its install (a
    start takes seconds under load; the cut, armed at READY, waits until then and a little
    more); the cut lands in the roll-over to the next gaming day (armed on its operations);
    restart; the checks. The trigger must fire: its operation is the roll-over's own."""
    table = PoweredTable(game, base, seed=rng.randrange(1, 2**31), pause=0.1, user=user)
    table.faketime, fake_now = faketime_before_six(ROLLOVER_LEAD)
    six_at = time.monotonic() + ROLLOVER_LEAD
    table.install(now=fake_now)
    try:
        why = table.start()
        if why is not None:
            table.fail(0, why)
            return table
        patience = max(0.0, six_at - time.monotonic()) + ARMED_PATIENCE
        table.cut_once(number, trigger, rng, patience)
        table.after_cut = {
            p.name: stat.S_IMODE(p.lstat().st_mode)
            for p in (table.mount.backing / "state").iterdir()
        }
        closed = [p.name for p in (table.mount.backing / "state").glob("journal-*.sqlite")]
        table.mount.remount()
        why = table.start()
        if why is not None:
            table.fail(number, f"{why} (closed segments on the disk: {closed})")
            return table
        table.check(number)
    finally:
        table.stop()
    return table


def clean(base: Path) -> None:
    shutil.rmtree(base, ignore_errors=True)


def held_key_slots(key_file: Path) -> int:
    """How many of the key file's two slots are not zeroes (one: the key it holds; two: the
    key it replaced is still readable there)."""
    raw = key_file.read_bytes()
    half = KEY_FILE_SIZE // 2
    return sum(1 for part in (raw[:half], raw[half:]) if part.strip(b"\0"))


#: Cuts during the restart's own recovery of an interrupted roll-over (the undo): its chmod of
#: the closed file, its rename back to the live name (before and after), its directory fsync.
RECOVERY_TRIGGERS: tuple[Trigger, ...] = (
    Trigger(
        "the recovery: the closed file made 0600 again",
        ("chmod",),
        r"/state/journal-\d{4}-\d\d-\d\d-\d{12}\.sqlite$",
    ),
    Trigger(
        "the recovery: before the closed file's rename back to the live one",
        ("rename",),
        r"/state/journal-\d{4}-\d\d-\d\d-\d{12}\.sqlite -> .*/state/journal\.sqlite$",
    ),
    Trigger(
        "the recovery: after the closed file's rename back to the live one",
        ("rename",),
        r"/state/journal-\d{4}-\d\d-\d\d-\d{12}\.sqlite -> .*/state/journal\.sqlite$",
        "after",
    ),
    Trigger("the recovery: its directory fsync", ("fsyncdir",), r"/state$"),
)


def double_cut_in_a_rollover(
    game: str, base: Path, recovery: Trigger, rng: random.Random, number: int = 1
) -> PoweredTable:
    """A cut inside the roll-over once the closed file's rename is durable (at the new
    segment's build), then a second cut during the restart's recovery of it (`recovery`, which
    must fire: the undo is the restart's own work), then a third start and the checks."""
    create = next(t for t in ROLLOVER_TRIGGERS if t.ops == ("create",))
    table = PoweredTable(game, base, seed=rng.randrange(1, 2**31), pause=0.1)
    table.faketime, fake_now = faketime_before_six(ROLLOVER_LEAD)
    six_at = time.monotonic() + ROLLOVER_LEAD
    table.install(now=fake_now)
    try:
        why = table.start()
        if why is not None:
            table.fail(0, why)
            return table
        patience = max(0.0, six_at - time.monotonic()) + ARMED_PATIENCE
        first = table.cut_once(number, create, rng, patience)
        if first is None or not first.fired:
            table.fail(number, f"the first cut did not come in the roll-over: {first}")
            return table
        table.mount.remount()
        why = table.start(arm=recovery)
        fired = why is not None and "exit -9" in why
        if why is None:  # READY first: the recovery never reached the operation
            assert table.process is not None
            table.mount.cut(kill=table.process.pid)
            table.process.wait(10)
            table._drain()
            table.process = None
        cuts = table.mount.cuts()
        said = recovery.name + ("" if fired else " (READY first: cut then)")
        table.record_cut(number + 1, recovery, fired, said, cuts[-1] if cuts else {"dropped": None})
        table.mount.remount()
        why = table.start()
        if why is not None:
            table.fail(number + 1, why)
            return table
        table.check(number + 1)
    finally:
        table.stop()
    return table


def tally(tables: list[PoweredTable]) -> list[dict[str, Any]]:
    """The cuts by mode and site: how many were made, how many fired at their armed operation
    (a random instant's always does), how many were checked after a restart, the acknowledged
    events those checks looked for in the journal (each check looks for every event the
    table acknowledged so far: an event is counted at each cut after it) and the ones they
    found lost, the events acknowledged since the table's previous cut (`new`: what the
    daemon did between the restart and this cut), and the findings (of any kind) made at
    them."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for table in tables:
        before = 0
        for cut in table.cuts:
            row = rows.setdefault(
                (cut.mode, cut.site),
                {
                    "mode": cut.mode,
                    "site": cut.site,
                    "cuts": 0,
                    "fired": 0,
                    "checked": 0,
                    "acknowledged": 0,
                    "lost": 0,
                    "new": 0,
                    "findings": 0,
                },
            )
            row["new"] += max(cut.acknowledged - before, 0)
            before = cut.acknowledged
            row["cuts"] += 1
            row["fired"] += int(cut.fired)
            if cut.lost is not None and cut.looked_for is not None:
                row["checked"] += 1
                row["acknowledged"] += cut.looked_for
                row["lost"] += cut.lost
            row["findings"] += sum(1 for f in table.findings if f.cut == cut.number)
    return [rows[key] for key in sorted(rows)]


def tally_text(rows: list[dict[str, Any]]) -> str:
    """The tally as lines: one a mode and site, a total a mode, the total."""
    lines = ["cuts fired checked acknowledged lost    new findings  mode: site"]

    def line(row: dict[str, Any], label: str) -> str:
        numbers = ("cuts", "fired", "checked", "acknowledged", "lost", "new", "findings")
        widths = (4, 5, 7, 12, 4, 6, 8)
        cells = " ".join(f"{row[n]:>{w}}" for n, w in zip(numbers, widths, strict=True))
        return f"{cells}  {label}"

    def total(selected: list[dict[str, Any]]) -> dict[str, Any]:
        keys = ("cuts", "fired", "checked", "acknowledged", "lost", "new", "findings")
        return {key: sum(r[key] for r in selected) for key in keys}

    for mode in sorted({r["mode"] for r in rows}):
        of_mode = [r for r in rows if r["mode"] == mode]
        lines += [line(r, f"{mode}: {r['site']}") for r in of_mode]
        lines.append(line(total(of_mode), f"{mode}: all sites"))
    lines.append(line(total(rows), "every mode"))
    return "\n".join(lines)
