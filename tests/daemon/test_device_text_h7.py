"""H7: a device's own words (a fault's name or detail) never carry a card out of the journal.

Firmware is untrusted (DESIGN.md, security posture): it may put a face-down card in a fault's
text in any case (AH, ah, 10H). The journal keeps what the device sent; the engine's reasons,
`status`, logs and alarms see [card] instead.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tablectl.controller.common import logs
from tablectl.controller.engine.cards import mask_card_words
from tablectl.controller.record.journal import read_rows
from tablectl.controller.service.service import open_service
from tests.daemon.test_service import SETUP, config_for, fixed_clock

# any card-shaped word, whatever its case
ANY_CASE_CARD = re.compile(r"(?<![\w.])(?:10|[2-9tjqka])[cdhs](?!\w)|(?<![\w.])jk(?!\w)", re.I)


@pytest.mark.parametrize(
    ("said", "shown"),
    [
        ("AH", "[card]"),
        ("jam at ah", "jam at [card]"),
        ("card 10H stuck", "card [card] stuck"),
        ("'Jk' seen", "'[card]' seen"),
        ("sensor", "sensor"),  # words stay
        ("AHEAD of 2CD", "AHEAD of 2CD"),  # only a card standing alone is card-shaped
        ("e2.4c", "e2.4c"),  # a version number is not a card
    ],
)
def test_card_words_are_masked_in_any_case(said: str, shown: str) -> None:
    assert mask_card_words(said) == shown


def test_a_fault_word_that_is_a_card_stays_in_the_journal_only(tmp_path: Path) -> None:
    config = config_for(tmp_path)

    async def scenario() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        service = await open_service(config, clock=fixed_clock)
        for event in SETUP:
            await service.handle_event(event)
        decisions = await service.handle_event(
            {"type": "shuffler_fault", "fault": "QH", "detail": "the qh card jammed"}
        )
        status = service.status()
        service.close()
        return decisions, status

    decisions, status = asyncio.run(scenario())
    assert decisions and decisions[0]["rule_id"] == "C4"
    assert not ANY_CASE_CARD.search(json.dumps(decisions)), decisions
    assert "[card]" in decisions[0]["reason"]
    assert not ANY_CASE_CARD.search(json.dumps(status)), status
    faults = [
        r.body for r in read_rows(config.journal_path) if r.body.get("type") == "shuffler_fault"
    ]
    assert faults == [{**faults[0], "fault": "QH", "detail": "the qh card jammed"}]


def test_device_words_in_log_lines_are_masked_in_any_case() -> None:
    stream = io.StringIO()
    logs.configure_logging("debug", mode="json", stream=stream)
    log = logs.get_logger("drivers")
    log.debug("device_event", type="shoe_fault", fault="AH", detail="stuck on 10h at jd")
    log.info("other", note="we AH")  # other text: the canonical spelling only (words stay)
    record, other = (json.loads(line) for line in stream.getvalue().splitlines())
    assert record["fault"] == "[card]" and record["detail"] == "stuck on [card] at [card]"
    assert other["note"] == "we AH"


def test_an_over_long_fault_text_is_refused_without_its_words() -> None:
    """The refusal names the field and its length, never the device's text (it may name a card)."""
    from tablectl.controller.engine.core import Engine
    from tablectl.controller.engine.table import TableSpec

    engine = Engine(TableSpec.from_dict({"game": "five_card_hilo"}))
    text = "misfeed: next card Ah, then Kd " + "x" * 300
    decisions = [d.to_dict() for d in engine.handle({"type": "shoe_fault", "fault": text}, 2)]
    assert [d["decision"] for d in decisions] == ["rejected"]
    assert (
        "fault: must be text of 1-255 characters, got str of length 331" in decisions[0]["reason"]
    )
    assert not ANY_CASE_CARD.search(json.dumps(decisions)), decisions


def test_the_demos_narration_masks_a_devices_fault_words() -> None:
    """`tablectl demo` prints each event and a summary from the journal: no card either way."""
    import datetime

    from tablectl.controller.record.journal import JournalRow
    from tablectl.simulators.narration import StepPrinter, summarise

    out = io.StringIO()
    event = {"type": "shoe_fault", "fault": "misfeed at Ah", "device": "shoe"}
    printer = StepPrinter(out, cards_dealt=dict, clock=lambda: datetime.datetime(2026, 1, 1))
    printer(event, [], 0.001, "device")
    row = JournalRow(2, "event", 1, "2026-01-01T00:00:00+00:00", event, "0" * 64, "1" * 64)
    summary = "\n".join(summarise([row]).lines())
    assert "misfeed at [card]" in out.getvalue() and "shoe:misfeed at [card] x1" in summary
    assert not ANY_CASE_CARD.search(out.getvalue() + summary), out.getvalue() + summary
