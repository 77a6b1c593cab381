"""The comparison the acceptance test relies on must be able to fail."""

from __future__ import annotations

from pathlib import Path

from acceptance_format import compare, hidden_card_leaks, parse_scenario

SAMPLE = """{"type": "table", "game": "five_card_hilo", "options": {}}
# a comment line counts
{"type": "bets_closed", "positions": [1]}
{"type": "card_drawn", "card": "As", "face_up": true}
{"type": "card_drawn", "card": "Ts"}

#! hidden Ts before 5
#~ {"at": 3, "decision": "burn_card", "rule_id": "G2"}
#> {"at": [3, 4], "decision": "discard_card", "rule_id": "C1"}
#> {"at": 5, "decision": "void_hand", "rule_id": ["M1", "S3"], "position": 1}
#> {"at": 5, "decision": "rejected", "rule_id": "*"}
"""


def sample(tmp_path: Path) -> Path:
    path = tmp_path / "sample.jsonl"
    path.write_text(SAMPLE)
    return path


def d(at: int, decision: str, rule_id: str, **extra: object) -> dict[str, object]:
    return {"at": at, "decision": decision, "rule_id": rule_id, **extra}


def test_exact_list_passes_with_or_without_optional(tmp_path: Path) -> None:
    sc = parse_scenario(sample(tmp_path))
    exact = [d(4, "discard_card", "C1"), d(5, "void_hand", "S3", position=1), d(5, "rejected", "x")]
    assert compare(sc, exact) == []
    assert compare(sc, [d(3, "burn_card", "G2"), *exact]) == []


def test_missing_extra_wrong_rule_wrong_position_and_order_fail(tmp_path: Path) -> None:
    sc = parse_scenario(sample(tmp_path))
    good = [d(4, "discard_card", "C1"), d(5, "void_hand", "M1", position=1), d(5, "rejected", "*")]
    assert compare(sc, good[:2]) != []
    assert compare(sc, [*good, d(5, "reshuffle", "M3")]) != []
    assert compare(sc, [d(4, "discard_card", "C2"), *good[1:]]) != []
    assert compare(sc, [good[0], d(5, "void_hand", "M1", position=2), good[2]]) != []
    assert compare(sc, [good[1], good[0], good[2]]) != []
    assert compare(sc, [d(6, "discard_card", "C1"), *good[1:]]) != []


def test_hidden_card_named_before_reveal_is_a_leak(tmp_path: Path) -> None:
    sc = parse_scenario(sample(tmp_path))
    assert sc.hidden == [("Ts", 5)]
    leak = {**d(4, "discard_card", "C1"), "reason": "the 10s was face up"}
    assert hidden_card_leaks(sc, [leak]) != []
    later = {**d(5, "void_hand", "M1"), "reason": "Ts"}
    assert hidden_card_leaks(sc, [later]) == []
    word = {**d(4, "discard_card", "C1"), "reason": "Its face was up"}
    assert hidden_card_leaks(sc, [word]) == []


def test_exit_directive_with_a_line_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(SAMPLE.replace("#! hidden", "#! exit 2 at line 4\n#! hidden"))
    sc = parse_scenario(path)
    assert (sc.exit_status, sc.exit_line) == (2, 4)
    plain = parse_scenario(sample(tmp_path))
    assert (plain.exit_status, plain.exit_line) == (None, None)
