"""Replay every bundled scenario and print its decisions (`make demo` for now)."""

from __future__ import annotations

import sys

from tablectl.controller.commands.replay import replay
from tablectl.simulators.scenarios import bundled


def main() -> int:
    for game, text in bundled().items():
        print(f"== {game}")
        lines = text.splitlines()
        for decision in replay(lines):
            line = lines[decision["at"] - 1]
            event = line if len(line) <= 70 else line[:67] + "..."
            print(
                f"  line {decision['at']:>3}  {decision['decision']:<20} {decision['rule_id']:<4}"
                f" {decision['rule']:<32} <- {event}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
