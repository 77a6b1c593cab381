"""Run under libfaketime by test_clock_steps.py: the table service (its real journal, its
real clock stamping every event) plays four Three Card 21 rounds with the hole-card reader,
the clock stepped between them by rewriting FAKETIME_TIMESTAMP_FILE. Prints one JSON line
per round: the gaming day the event's time falls in and the H1 decisions taken.

    python -m tests.journal.h1_across_clock_steps CONFIG CLOCK_FILE
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from tablectl.controller.common.config import load_config
from tablectl.controller.engine.gaming_day import gaming_day_of
from tablectl.controller.record.journal import Journal
from tablectl.controller.service.service import TableService

CARDS = iter(
    [
        "2c",
        "Kd",
        "3c",
        "7c",
        "4c",
        "5c",
        "Kh",
        "6c",
        "8c",
        "9c",
        "2d",
        "Qd",
        "3d",
        "7d",
        "4d",
        "5d",
        "Qh",
        "6d",
        "8d",
        "9d",
    ]
)
# (the clock's offset before the round, whether a supervisor inspects the reader first)
PLAN = [("+0", True), ("+65d", False), ("+65d", True), ("+0", False)]


async def main(config_path: Path, clock_file: Path) -> None:
    config = load_config(config_path)
    service = TableService(config, Journal(config.journal_path))
    await service.start()
    for offset, inspect in PLAN:
        clock_file.write_text(f"{offset}\n")
        decided: list[dict[str, Any]] = []
        if inspect:
            decided += await service.handle_event(
                {"type": "reader_inspected", "by": "floor-1"}, source="operator"
            )
        events: list[dict[str, Any]] = [{"type": "bets_closed", "positions": [1]}]
        events += [{"type": "card_drawn", "card": next(CARDS)} for _ in range(5)]
        events += [{"type": "deal_completed"}, {"type": "bonus_settled"}]
        for event in events:
            decided += await service.handle_event(event)
        inserted = await service.handle_event({"type": "reader_inserted"})
        decided += inserted
        decided += await service.handle_event({"type": "reader_result", "blackjack": False})
        decided += await service.handle_event({"type": "hands_collected"}, source="operator")
        stamped = service.journal.tail_rows(64)
        insert_time = next(
            r.body["time"] for r in reversed(stamped) if r.body.get("type") == "reader_inserted"
        )
        from datetime import datetime

        day = gaming_day_of(datetime.fromisoformat(insert_time), config.gaming_day_start)
        print(
            json.dumps(
                {
                    "offset": offset,
                    "inspected_now": inspect,
                    "gaming_day": day.isoformat(),
                    "at_insert": sorted(
                        f"{d['rule_id']}:{d['decision']}" for d in inserted if d.get("rule_id")
                    ),
                }
            ),
            flush=True,
        )
    service.close()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2])))
