"""Decisions: what the engine tells the table to do, each traced to a rule."""

from __future__ import annotations

from typing import Any


class Decision:
    """One decision of docs/events.md: its name, the citation, the rule ID, the event line, why."""

    __slots__ = ("at", "decision", "extras", "reason", "rule", "rule_id")

    def __init__(
        self,
        decision: str,
        rule: str = "docs/events.md",
        rule_id: str = "E0",
        at: int = 0,
        reason: str = "",
        **extras: Any,
    ) -> None:
        self.decision = decision
        self.rule = rule
        self.rule_id = rule_id
        self.at = at
        self.reason = reason
        self.extras = extras

    def to_dict(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "rule": self.rule,
            "rule_id": self.rule_id,
            "at": self.at,
            "reason": self.reason,
            **self.extras,
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Decision) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((self.decision, self.rule_id, self.at))

    def __repr__(self) -> str:
        extras = "".join(f", {k}={v!r}" for k, v in self.extras.items())
        return f"Decision({self.decision!r}, rule_id={self.rule_id!r}, at={self.at}{extras})"
