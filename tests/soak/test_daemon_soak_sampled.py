"""A small sampled daemon soak in `make test`: a few rounds per table through ptys, the pyusb
backend and the running daemon, faults at a high rate, every invariant; and proof that the
per-round checks fail on what they must catch.

`make soak` runs the full 10,000 rounds (tests/soak/daemon_soak.py).
"""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

from tablectl.simulators.autodealer import HandledEvent, RoundReport
from tests.soak.daemon_soak import (
    TABLES,
    FaceDownWatch,
    RoundChecker,
    TableSummary,
    by_game,
    main,
    run_daemon_soak,
    split_rounds,
    table_text,
)


def test_a_few_rounds_per_table_keep_every_invariant(tmp_path: Path) -> None:
    tables = run_daemon_soak(
        rounds=4 * len(TABLES), fault_rate=0.5, seed=21, jobs=2, directory=tmp_path
    )
    assert set(tables) == set(TABLES)
    for (game, dealing), summary in tables.items():
        assert summary.failures == [], (game, dealing)
        assert summary.rounds == 4
        assert summary.journals_verified == 1
        assert summary.series_compared >= 1 and summary.mismatches == 0
        assert summary.log_lines > 0
        assert summary.caught == summary.injected
        assert summary.completed + summary.voided + summary.hands_dead == 4
    injected = sum(sum(s.injected.values()) for s in tables.values())
    assert injected >= 4
    games = by_game(tables)
    assert sorted(games) == ["asia_poker", "five_card_hilo", "heads_up_holdem", "three_card_21"]
    assert games["five_card_hilo"].rounds == 8
    assert "five_card_hilo" in table_text(games)


def test_the_rounds_are_shared_over_every_table() -> None:
    assert split_rounds(10_000) == [1667, 1667, 1667, 1667, 1666, 1666]
    assert sum(split_rounds(7)) == 7


def test_bad_options_are_refused_by_name() -> None:
    import pytest

    with pytest.raises(SystemExit):
        main(["--fault-rate", "1.5"], out=io.StringIO())
    with pytest.raises(SystemExit):
        main(["--rounds", "0"], out=io.StringIO())


def _checker(summary: TableSummary, dealing: str = "automated_shoe") -> RoundChecker:
    return RoundChecker("five_card_hilo", dealing, 100, summary, FaceDownWatch(summary))


def _report(faults: list[str], *handled: HandledEvent, number: int = 1) -> RoundReport:
    return RoundReport(number, "five_card_hilo", [1], 10, faults, list(handled))


def _event(kind: str, *decisions: dict[str, object]) -> HandledEvent:
    return HandledEvent({"type": kind}, list(decisions), 0.001, "device")


def test_the_checks_pass_a_caught_fault_and_fail_one_not_caught() -> None:
    void = {"decision": "void_round", "rule_id": "C5", "round": 1}
    caught = TableSummary()
    _checker(caught).check(_report(["ads_jam"], _event("shoe_fault", void)), 1)
    assert caught.failures == [] and caught.caught["ads_jam"] == 1 and caught.voided == 1

    missed = TableSummary()
    _checker(missed).check(_report(["ads_jam"], _event("shoe_fault")), 1)
    assert missed.caught["ads_jam"] == 0
    assert any("ads_jam did not draw void_round (C5)" in line for line in missed.failures)

    unplugged = TableSummary()
    _checker(unplugged, "manual_shoe").check(
        _report(["unplug_shoe"], _event("device_lost"), _event("device_connected")), 1
    )
    assert unplugged.failures == [] and unplugged.caught["unplug_shoe"] == 1


def test_the_checks_fail_on_a_decision_twice_two_voids_or_a_skipped_round() -> None:
    void = {"decision": "void_round", "rule_id": "C5"}
    summary = TableSummary()
    checker = _checker(summary)
    checker.check(_report([], _event("card_drawn")), 1)
    assert summary.failures == []
    checker.check(_report(["ads_jam"], _event("shoe_fault", void, dict(void))), 3)
    assert any("round number went 1 -> 3" in line for line in summary.failures)
    assert any("decided 2 times" in line for line in summary.failures)
    assert any("2 void_round decisions" in line for line in summary.failures)
    clean = TableSummary()
    _checker(clean).check(_report([], _event("card_drawn", void)), 1)
    assert any("a fault-free round drew ['void_round']" in line for line in clean.failures)


def test_the_checks_fail_on_a_face_down_card_in_a_log_line_or_the_summary() -> None:
    summary = TableSummary()
    watch = FaceDownWatch(summary)
    table = SimpleNamespace(
        shoe=SimpleNamespace(cards=["Qs", "10d"]), shuffler=SimpleNamespace(cards=["JK"])
    )
    watch.harness = SimpleNamespace(table=table)  # type: ignore[assignment]
    watch.write('{"event": "card_drawn", "card": "Ah"}\n{"event": "x", "next": "Qs"}\n{"a"')
    watch.write(': "JK"}\n')
    assert summary.log_lines == 3
    assert [line.split(" in ")[0] for line in summary.failures] == [
        "start: face-down card(s) ['Qs']",
        "start: face-down card(s) ['JK']",
    ]
    checker = RoundChecker("five_card_hilo", "manual_shoe", 9, summary, watch)
    checker.stdout.write(
        "round    1 five_card_hilo  completed positions 1 cards 5 decisions - 10d\n"
    )
    checker.check(_report([]), 1)
    assert any("a card in the summary line" in line for line in summary.failures)
    assert checker.stdout.getvalue() == ""


def test_a_deck_removed_twice_in_one_round_is_caught_but_not_across_rounds() -> None:
    removal = {"decision": "remove_deck", "rule_id": "C7", "deck": "A"}
    twice = TableSummary()
    _checker(twice).check(
        _report(["ads_jam"], _event("shoe_fault", removal), _event("card_drawn", dict(removal))), 1
    )
    assert any("deck A removed twice" in line for line in twice.failures)
    apart = TableSummary()
    checker = _checker(apart)
    checker.check(_report(["ads_jam"], _event("shoe_fault", removal)), 1)
    checker.check(_report(["ads_jam"], _event("shoe_fault", removal)), 2)
    assert not any("removed twice" in line for line in apart.failures)
    assert apart.removals["C7"] == 2
