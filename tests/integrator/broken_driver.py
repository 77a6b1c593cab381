"""A deliberately broken shoe driver, kept so the conformance kit is seen to fail it.

It speaks the reference protocol (the reference simulator serves it) but breaks two rules a
driver must keep: it logs every card it reads (rule H7: no face-down card in a log line), and
it swallows the shoe's fault reports (a jam never reaches the round engine, C5).
"""

from __future__ import annotations

from typing import Any

from tablectl.drivers.reference import ReferenceShoe


class CardLeakingShoe(ReferenceShoe):
    def emit(self, event_type: str, **fields: Any) -> None:
        if event_type == "card_drawn":
            self.log.info("card_read", card=fields["card"])  # the leak
        if event_type == "shoe_fault":
            return  # the swallowed fault
        super().emit(event_type, **fields)
