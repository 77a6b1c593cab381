"""Retention never deletes the only copy (issue 31): the archive must be another place, and
only a copy made now and compared byte for byte counts as one.

On seven real closed segments (sealed by the upkeep, tests/journal/test_clock_steps.py):
an `archive_dir` that is the journal's own directory (before: "moved ... (copy verified)"
and rows 1-23 gone for good), inside it or above it, or on its filesystem without the words,
is refused by retention and by `check-config`; a symlink planted in the archive under a
segment's name (before: the segment deleted, a dangling link left) and a file of the
segment's name with other content are refused, the segment kept; with the words, the
segments are copied, compared, removed, and what is kept verifies with the archive as one
chain.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path

from tablectl.controller.record.journal import verify_journal
from tablectl.controller.record.journal_upkeep import apply_retention
from tests.journal.history import SAME_DISK_SAID, write_config
from tests.journal.test_clock_steps import _today, seven_closed_segments

LIVE_DAY = _today() - datetime.timedelta(days=1)


def _segments(tmp_path: Path) -> tuple[Path, list[Path], dict[Path, bytes]]:
    config = write_config(tmp_path / "t")
    closed, _ = seven_closed_segments(config)
    return config, closed, {path: path.read_bytes() for path in closed}


def _retire(live: Path, archive: Path, *, said: bool = False):  # type: ignore[no-untyped-def]
    return apply_retention(
        live, _today(), 3, archive, live_day=LIVE_DAY, archive_same_filesystem=said
    )


def _all_kept(closed: list[Path], before: dict[Path, bytes]) -> None:
    for path in closed:
        assert path.read_bytes() == before[path], f"{path.name} changed or went"


def test_an_archive_in_the_journals_own_directory_is_refused(tmp_path: Path) -> None:
    config, closed, before = _segments(tmp_path)
    live = config.parent / "journal.sqlite"
    for archive in (config.parent, config.parent / "archive", config.parent.parent):
        outcome = _retire(live, archive, said=True)
        assert outcome.retired == [], archive
        assert len(outcome.kept) == 5
        assert all("archive_dir refused" in why for _, why in outcome.kept), outcome.kept
        _all_kept(closed, before)
    # the same directory through a symlink elsewhere
    alias = tmp_path / "alias"
    alias.symlink_to(config.parent)
    outcome = _retire(live, alias, said=True)
    assert outcome.retired == [] and "journal's own directory" in outcome.kept[0][1]
    _all_kept(closed, before)
    assert verify_journal(config.parent).ok


def test_an_archive_on_the_journals_filesystem_needs_the_words(tmp_path: Path) -> None:
    config, closed, before = _segments(tmp_path)
    live = config.parent / "journal.sqlite"
    archive = tmp_path / "archive"
    refused = _retire(live, archive)
    assert refused.retired == []
    assert all("journal's own filesystem" in why for _, why in refused.kept)
    _all_kept(closed, before)
    done = _retire(live, archive, said=True)
    assert [p.name for p, _ in done.retired] == [p.name for p in closed[:5]]
    for path, how in done.retired:
        assert str(archive / path.name) in how  # where the copy is
        assert (archive / path.name).read_bytes() == before[path]
        assert not (archive / path.name).is_symlink()
    assert sorted(config.parent.glob("journal-*.sqlite")) == closed[5:]
    assert not [p for p in archive.iterdir() if p.name.startswith(".")]  # no temporary left
    whole = subprocess.run(
        [
            sys.executable,
            "-m",
            "tablectl.controller",
            "journal",
            "verify",
            str(config.parent),
            "--archive",
            str(archive),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert whole.returncode == 0, whole.stdout + whole.stderr


def test_a_symlink_planted_in_the_archive_is_refused_and_the_segment_kept(
    tmp_path: Path,
) -> None:
    config, closed, before = _segments(tmp_path)
    live = config.parent / "journal.sqlite"
    archive = tmp_path / "archive"
    archive.mkdir()
    planted = archive / closed[0].name
    planted.symlink_to(closed[0])  # back at the local segment: "already archived"
    outcome = _retire(live, archive, said=True)
    kept = dict(outcome.kept)
    assert closed[0] in kept and "not a regular file" in kept[closed[0]]
    assert closed[0].read_bytes() == before[closed[0]]
    assert planted.is_symlink() and planted.resolve() == closed[0]  # left as it was
    # the others were copied for real
    assert [p.name for p, _ in outcome.retired] == [p.name for p in closed[1:5]]


def test_a_file_of_the_segments_name_with_other_content_is_refused(tmp_path: Path) -> None:
    config, closed, before = _segments(tmp_path)
    live = config.parent / "journal.sqlite"
    archive = tmp_path / "archive"
    archive.mkdir()
    (archive / closed[0].name).write_bytes(before[closed[1]])  # a sound segment, not this one
    os.link(closed[2], archive / closed[2].name)  # the segment's own inode, not a copy
    outcome = _retire(live, archive, said=True)
    kept = dict(outcome.kept)
    assert "other content" in kept[closed[0]]
    assert "hard link" in kept[closed[2]]
    _all_kept([closed[0], closed[2]], before)
    assert {p.name for p, _ in outcome.retired} == {closed[1].name, closed[3].name, closed[4].name}


def test_check_config_refuses_the_journals_own_directory_as_archive(tmp_path: Path) -> None:
    directory = tmp_path / "t"
    cases = {
        f'archive_dir = "{directory}"\n{SAME_DISK_SAID}': "journal's own directory",
        f'archive_dir = "{directory / "a"}"\n{SAME_DISK_SAID}': "inside the journal's directory",
        f'archive_dir = "{tmp_path}"\n{SAME_DISK_SAID}': "holds the journal's directory",
        f'archive_dir = "{tmp_path / "elsewhere"}"': "journal's own filesystem",
        f'archive_dir = "{tmp_path / "e"}"\narchive_same_filesystem = "yes"': "in words",
    }
    for extra, expected in cases.items():
        config = write_config(directory, journal_extra=f"retain_days = 3\n{extra}")
        done = subprocess.run(
            [sys.executable, "-m", "tablectl.controller", "check-config", str(config)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode != 0, extra
        assert expected in done.stdout + done.stderr, done.stdout + done.stderr
    config = write_config(
        directory,
        journal_extra=f'retain_days = 3\narchive_dir = "{tmp_path / "e"}"\n{SAME_DISK_SAID}',
    )
    done = subprocess.run(
        [sys.executable, "-m", "tablectl.controller", "check-config", str(config)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "archive_dir" not in done.stdout + done.stderr, done.stdout + done.stderr


def test_run_refuses_the_journals_own_directory_as_archive(tmp_path: Path) -> None:
    directory = tmp_path / "t"
    config = write_config(
        directory, journal_extra=f'retain_days = 3\narchive_dir = "{directory}"\n{SAME_DISK_SAID}'
    )
    done = subprocess.run(
        [sys.executable, "-m", "tablectl.controller", "run", "--config", str(config)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "journal.archive_dir" in done.stdout + done.stderr
    assert "journal's own directory" in done.stdout + done.stderr
    assert not (directory / "journal.sqlite").exists()  # refused before the journal was opened
