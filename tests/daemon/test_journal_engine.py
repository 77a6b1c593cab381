"""With the round engine installed: rebuild a round from the journal; options it refuses."""

from __future__ import annotations

import re
import secrets
from pathlib import Path

import pytest

from tablectl.controller.commands import cli
from tablectl.controller.common.config import ConfigError, load_config
from tablectl.controller.engine import core as engine_module
from tablectl.controller.engine import table as table_module
from tablectl.controller.record.journal import (
    Journal,
    JournalError,
    read_rows,
    replay_round,
    round_cards,
)

TABLE = {"type": "table", "game": "five_card_hilo", "options": {"dealing": "manual_shoe"}}
CARDS = ["As", "Kd", "7h", "7c", "2s", "3c", "4d", "5h", "6s", "8c", "9d", "Th", "Js", "Qc", "Kh"]
SETUP = [
    {"type": "deck_received"},
    {"type": "shuffle_completed", "count": 52},
    {"type": "shoe_loaded"},
]


def journal_of_two_rounds(path: Path) -> Path:
    """What the table service writes: the table row, then each event and its decisions."""
    engine = engine_module.Engine(
        table_module.TableSpec.from_dict(TABLE), random_source=secrets.randbelow
    )
    events = [
        *SETUP,
        {"type": "bets_closed", "positions": [1, 2]},
        *({"type": "card_drawn", "card": card} for card in CARDS),
        {"type": "deal_completed"},
        {"type": "hands_collected"},
        {"type": "shuffle_completed", "count": 52},
        {"type": "shoe_loaded"},
        {"type": "bets_closed", "positions": [1]},
        *({"type": "card_drawn", "card": card} for card in CARDS[5:]),
    ]
    with Journal(path) as journal:
        journal.append("table", TABLE)
        for event in events:
            seq = journal.append("event", event, round_number=engine.round_number)
            for decision in engine.handle(event, seq):
                journal.append("decision", decision.to_dict(), round_number=engine.round_number)
    return path


def test_round_rebuilt_in_deal_order_hand_by_hand(tmp_path, capsys):
    path = journal_of_two_rounds(tmp_path / "j.sqlite")
    first = round_cards(path, 1)
    assert [c["card"] for c in first] == CARDS
    assert [c["to"] for c in first[:3]] == [1, 2, "dealer"]
    second = round_cards(path, 2)
    assert [c["card"] for c in second] == CARDS[5:]
    assert cli.main(["journal", "show", str(path), "--round", "1"]) == 0
    out = capsys.readouterr().out
    assert "position 1: As 7c 4d 8c Js" in out
    assert "dealer: 7h 3c 6s Th Kh" in out


def test_journal_show_takes_the_journals_directory_as_verify_and_export_do(tmp_path, capsys):
    """`journal show DIR --round N` finds the segment that holds the round (issue 34: it
    refused the directory that `verify` and `export` take)."""
    directory = tmp_path / "t1"
    directory.mkdir()
    path = journal_of_two_rounds(directory / "journal.sqlite")
    capsys.readouterr()  # the journal's own log lines
    assert cli.main(["journal", "show", str(path), "--round", "1"]) == 0
    from_file = capsys.readouterr().out
    assert cli.main(["journal", "show", str(directory), "--round", "1"]) == 0
    assert capsys.readouterr().out == from_file
    assert "position 1: As 7c 4d 8c Js" in from_file
    assert cli.main(["journal", "show", str(directory), "--round", "7"]) == 2
    assert f"{directory}: no segment holds round 7" in capsys.readouterr().err


def test_the_round_in_play_is_never_shown_by_journal_show_or_floor_round(tmp_path, capsys):
    """H7: `journal show` and `floor round` (replay_round over the floor's rows) show a
    round's cards once it is over; round 2 is still being dealt."""
    path = journal_of_two_rounds(tmp_path / "j.sqlite")
    assert cli.main(["journal", "show", str(path), "--round", "2"]) != 0
    out, err = capsys.readouterr()
    assert "round 2 is still in play" in err and "(H7)" in err
    assert not re.search(rf"(?<![\w.])(?:{'|'.join(CARDS)})(?!\w)", out + err), out + err
    rows = list(read_rows(path))
    with pytest.raises(JournalError, match="round 2 is still in play"):
        replay_round(rows, 2, where="floor table t1", over_only=True)
    assert replay_round(rows, 1, over_only=True) == round_cards(path, 1)  # collected: shown
    assert [c["card"] for c in replay_round(rows, 2)] == CARDS[5:]  # the journal's own tools


def test_engine_refused_option_names_file_and_key(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text('[table]\nid = "t1"\ngame = "five_card_hilo"\n[table.options]\npositions = 9\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    (problem,) = caught.value.problems
    assert problem.startswith(f"{path}: table.options: ")
    assert "positions" in problem
