"""`tablectl replay` and `tablectl diagram` as EVENTS.md and the issue describe them."""

from __future__ import annotations

import json
import shutil

import pytest

from tablectl.controller.commands import cli
from tablectl.controller.engine.machine import definition


def write(tmp_path, *lines):
    path = tmp_path / "scenario.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


TABLE = '{"type": "table", "game": "five_card_hilo", "options": {"dealing": "automated_shoe"}}'


def test_replay_prints_json_lines_with_at_the_line_number(tmp_path, capsys):
    path = write(
        tmp_path,
        "# a comment",
        TABLE,
        "",
        '{"type": "shuffle_completed", "count": 52}',
        '{"type": "bets_closed", "positions": [1, 2, 3, 4, 5, 6, 7, 8]}',
    )
    assert cli.main(["replay", path]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(out) == 1
    assert out[0]["decision"] == "rejected" and out[0]["at"] == 5
    assert set(out[0]) >= {"decision", "rule", "rule_id", "at", "reason", "error"}


@pytest.mark.parametrize(
    ("lines", "problem"),
    [
        ((TABLE, "{not json"), "line 2: not valid JSON"),
        ((TABLE, "[1, 2]"), "line 2: an event must be a JSON object"),
        ((TABLE, '{"card": "As"}'), 'line 2: the object has no "type"'),
        (
            ('{"type": "bets_closed", "positions": [1]}',),
            "line 1: the first line must be the table",
        ),
        (('{"type": "table", "game": "hilo"}',), "line 1: table refused: game"),
        (
            ('{"type": "table", "game": "heads_up_holdem", "options": {"positions": 9}}',),
            "line 1: table refused: option positions: 9",
        ),
        ((TABLE, TABLE), "line 2: a second table line"),
    ],
)
def test_replay_exits_2_naming_the_line_and_the_problem(tmp_path, capsys, lines, problem):
    assert cli.main(["replay", write(tmp_path, *lines)]) == 2
    assert problem in capsys.readouterr().err


def test_replay_of_a_missing_file_exits_2(tmp_path, capsys):
    assert cli.main(["replay", str(tmp_path / "nope.jsonl")]) == 2
    assert "nope.jsonl" in capsys.readouterr().err


def test_replay_decisions_before_a_bad_line_are_printed(tmp_path, capsys):
    path = write(tmp_path, TABLE, '{"type": "stack_dispensed", "cards": ["As"]}', "oops")
    assert cli.main(["replay", path]) == 2
    captured = capsys.readouterr()
    assert '"procedure_violation"' in captured.out
    assert "line 3" in captured.err


@pytest.mark.parametrize(
    "game", ["three_card_21", "five_card_hilo", "heads_up_holdem", "asia_poker"]
)
def test_diagram_prints_mermaid_from_the_machine_definition(game, capsys):
    assert cli.main(["diagram", "--game", game]) == 0
    out = capsys.readouterr().out
    assert "stateDiagram-v2" in out
    edges = [line.strip() for line in out.splitlines() if "-->" in line]
    for trigger, sources, dest, conditions in definition(game).transitions:
        for source in sources:
            to = source if dest == "=" else dest
            (edge,) = [e for e in edges if e.startswith(f"{source} --> {to}: ")]
            label = f"{trigger} [{' & '.join(conditions)}]" if conditions else trigger
            assert label in edge, (edge, label)


def test_diagram_names_the_gating_rules_on_their_edges(capsys):
    """Issue #10: the rules that allow or refuse a step are on the chart, by rule ID."""
    cli.main(["diagram", "--game", "five_card_hilo"])
    out = capsys.readouterr().out
    (deal,) = [line for line in out.splitlines() if "start_deal [" in line]
    for rule in ("C10_", "C6_", "D4_", "C4_", "D1_D3_", "S1_"):
        assert rule in deal
    assert (
        "close_bets [L1_no_round_in_play & C11_positions_within_the_table & "
        "C10_the_rounds_deck_in_place]" in out
    )
    assert "collect [L2_deal_complete & M7_misdeal_remedy_done]" in out  # issue 32
    assert "shuffle_mid_round [L3_the_rounds_cards_stay_out_of_the_shuffle]" in out
    cli.main(["diagram", "--game", "three_card_21"])
    out = capsys.readouterr().out
    players = next(line for line in out.splitlines() if "players --> players" in line)
    assert "insert_reader [H1_" in players
    cli.main(["diagram", "--game", "asia_poker"])
    assert "choose_start [A1_start_in_range]" in capsys.readouterr().out


def test_diagram_game_specific_steps(capsys):
    cli.main(["diagram", "--game", "three_card_21"])
    assert "players --> dealer_turn: start_dealer_turn" in capsys.readouterr().out
    cli.main(["diagram", "--game", "asia_poker"])
    assert "starting_position --> dealing: choose_start" in capsys.readouterr().out


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz not installed")
def test_diagram_renders_svg_with_graphviz(tmp_path, capsys):
    pytest.importorskip("graphviz")
    target = tmp_path / "chart.svg"
    assert cli.main(["diagram", "--game", "heads_up_holdem", "--svg", str(target)]) == 0
    assert "<svg" in target.read_text()


def test_bundled_scenarios_replay_for_make_demo(capsys):
    from tablectl.simulators.scenarios.__main__ import main

    assert main() == 0
    out = capsys.readouterr().out
    for game in ("three_card_21", "five_card_hilo", "heads_up_holdem", "asia_poker"):
        assert f"== {game}" in out
    assert "burn_card" in out and "void_hand" in out and "remove_deck" in out


@pytest.mark.parametrize(
    "game", ["three_card_21", "five_card_hilo", "heads_up_holdem", "asia_poker"]
)
def test_the_charts_in_docs_match_the_machines(game):
    from pathlib import Path

    from tablectl.controller.engine.machine import mermaid

    chart = Path(__file__).resolve().parents[3] / "docs" / "state-charts" / f"{game}.mmd"
    assert chart.read_text() == mermaid(definition(game)), "run `make diagrams`"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (
            '{"type": "card_drawn", "card": "1h"}',
            "line 2: card: bad card (2 characters, not shown)",
        ),
        ('{"type": "card_drawn", "card": 10}', "line 2: card:"),
        ('{"type": "card_drawn"}', "line 2: card: missing"),
        ('{"type": "card_burned", "card": "As"}', "line 2: type: unknown event type"),
        ('{"type": "shoe_loaded", "deck": "C"}', "line 2: deck: must be 'A' or 'B'"),
        ('{"type": "bets_closed", "positions": 3}', "line 2: positions: must be a list"),
        ('{"type": "stack_dispensed", "cards": ["As", "Zz"]}', "line 2: cards[1]: bad card"),
    ],
)
def test_replay_stops_with_exit_2_at_a_malformed_event(tmp_path, capsys, line, problem):
    assert cli.main(["replay", write(tmp_path, TABLE, line, '{"type": "deal_completed"}')]) == 2
    assert problem in capsys.readouterr().err


def test_replay_rejects_a_value_the_rules_refuse_and_goes_on(tmp_path, capsys):
    table = '{"type": "table", "game": "asia_poker"}'
    lines = (
        table,
        '{"type": "bets_closed", "positions": [1]}',
        '{"type": "starting_position", "dice": 19}',
        '{"type": "starting_position", "dice": 14}',
    )
    assert cli.main(["replay", write(tmp_path, *lines)]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [d["decision"] for d in out] == ["rejected", "starting_position"]
    assert "dice" in out[0]["error"]


def test_replay_of_an_empty_file_names_line_1(tmp_path, capsys):
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    assert cli.main(["replay", str(path)]) == 2
    assert "line 1: the file is empty" in capsys.readouterr().err


def test_diagram_svg_without_graphviz_says_what_is_missing_and_writes_nothing(tmp_path):
    """graphviz's `dot` absent (a PATH without it): a clear message, no traceback, no file."""
    import subprocess
    import sys

    target = tmp_path / "chart.svg"
    done = subprocess.run(
        [sys.executable, "-m", "tablectl.controller", "diagram", "--game", "three_card_21",
         "--svg", str(target)],
        capture_output=True, text=True, timeout=60, env={"PATH": str(tmp_path / "empty")},
    )  # fmt: skip
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        "tablectl diagram: no SVG written: graphviz's `dot` program is not on PATH "
        "(Debian: apt-get install graphviz)"
    )
    assert "stateDiagram-v2" in done.stdout  # the mermaid text is still printed
    assert list(tmp_path.iterdir()) == []
