"""Game API 1 (a game overriding hooks as methods of its one class: ``_plan``,
``_uncertain_count``, ``_next_target`` with ``super()``, ...) keeps working for one release
(tablectl 0.2), with a DeprecationWarning: hooks.py wraps its overrides into the families'
rules. The same game written for API 2 (its ``Deal`` rules) decides the same, byte for byte.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

from tablectl.controller.engine.core import Engine, Round
from tablectl.controller.engine.decisions import Decision
from tablectl.controller.engine.hooks import DealRules
from tablectl.controller.engine.ledger import DEALER
from tablectl.controller.engine.table import GameProfile, TableSpec

# Unnamed game classes (never registered, so nothing leaks into the registry), built directly
# over a table spec of a bundled game for its options.
SPEC = TableSpec.from_dict({"game": "five_card_hilo", "options": {"dealing": "manual_shoe"}})
PICKED: list[str] = []  # the targets the deal's next_target chose, in order


class Toy(Engine):
    """What both versions share: five positions, the default chart (its default deal, two
    cards each, is not the one their rules plan)."""

    profile = GameProfile("toy", "Toy", 5, 2, 2, 0, ("manual_shoe",), False)  # plans 1 each


class ApiTwo(Toy):
    """One card each and the dealer's; a wrong count voids all hands under K9."""

    class Deal(DealRules["ApiTwo"]):
        def plan(self, rnd: Round) -> None:
            players = [str(p) for p in rnd.positions]
            rnd.order = [*players, DEALER]
            rnd.expected = {**dict.fromkeys(players, 1), DEALER: 1}
            rnd.planned_cards = len(rnd.order)

        def next_target(self, rnd: Round) -> str:
            target = super().next_target(rnd)
            PICKED.append(target)
            return target

        def uncertain_count(self, rnd: Round, counted: str) -> list[Decision] | None:
            return self.game._void_round("M4", f"uncertain: {counted}")


def _api_one() -> type[Engine]:
    class ApiOne(Toy):
        """The same rules as ApiTwo's, as game API 1 wrote them."""

        def _plan(self, rnd: Round) -> None:
            players = [str(p) for p in rnd.positions]
            rnd.order = [*players, DEALER]
            rnd.expected = {**dict.fromkeys(players, 1), DEALER: 1}
            rnd.planned_cards = len(rnd.order)

        def _next_target(self, rnd: Round) -> str:
            target: str = super()._next_target(rnd)  # type: ignore[misc]
            PICKED.append(target)
            return target

        def _uncertain_count(self, rnd: Round, counted: str) -> list[Decision] | None:
            return self._void_round("M4", f"uncertain: {counted}")

    return ApiOne


EVENTS: list[dict[str, Any]] = [
    {"type": "shuffle_completed"},
    {"type": "bets_closed", "positions": [1, 2]},
    *({"type": "card_drawn", "card": c} for c in ("As", "Kd", "2c")),
    {"type": "deal_completed"},
    {"type": "hands_collected"},
    {"type": "shuffle_completed"},
    {"type": "bets_closed", "positions": [1, 3]},
    {"type": "card_drawn", "card": "Qh"},  # one card short: the uncertain count (M4)
    {"type": "deal_completed"},
    {"type": "hands_collected"},
]


def _trace(engine: Engine) -> list[str]:
    PICKED.clear()
    out = []
    for at, event in enumerate(EVENTS, start=2):
        decisions = engine.handle(event, at)
        out.append(json.dumps([d.to_dict() for d in decisions]))
        out.append(json.dumps(engine.status()))
        out.append(json.dumps(engine.snapshot()))
    out.append(json.dumps(PICKED))
    return out


def test_a_game_of_api_1_is_warned_naming_its_hooks():
    with pytest.warns(DeprecationWarning, match=r"_plan, _next_target, _uncertain_count"):
        _api_one()


def test_a_game_of_api_2_is_not_warned():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)

        class Quiet(ApiTwo):
            pass

    assert Quiet.Deal is ApiTwo.Deal


def test_a_game_of_api_1_decides_as_the_same_game_of_api_2():
    with pytest.warns(DeprecationWarning):
        api_one = _api_one()
    one = _trace(api_one(SPEC))
    two = _trace(ApiTwo(SPEC))
    assert one == two
    decided = [json.loads(line) for line in two[0::3]]
    # the games' own rules decided: their deal order (two hands of one card and the
    # dealer's, never five) and their uncertain count's M4
    assert json.loads(two[-1]) == ["1", "2", DEALER, "1"]
    assert [(d["decision"], d["rule_id"]) for d in decided[10]] == [
        ("void_round", "M4"),
        ("reshuffle", "M4"),
    ]
    assert "uncertain: " in decided[10][0]["reason"]
