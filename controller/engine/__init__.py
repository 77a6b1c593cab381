"""The round engine: events in, decisions out. Pure.

What lives here: the card ledger, the decks and the table's specification, the `transitions`
chart with its rule conditions (``rules``, named by rule ID), the decisions and the event
language, shuffle integrity's checks, the gaming day's arithmetic, and one module per game
under ``games/`` over a core (``core.Engine``) that names no game.

What it may import: the standard library and `transitions`, nothing else of tablectl. No
I/O, no clock and no randomness of its own: time comes in the event, randomness is injected.
The same event stream always yields the same decisions, which is what replay, crash recovery
and a dispute's reconstruction rest on. ``tests/unit/test_architecture.py`` enforces this.
"""
