"""The table's legal record: the journal (SQLite, hash-chained, segments per gaming day),
its forward-secure seals, verification, upkeep (seals, the roll-over, retention), exports
and durable files (``durable``: every file the product writes whole goes through it).

What it may import: the engine and ``common``. Nothing of the floor, the service or the
commands: the daemon drives upkeep through the small interface upkeep declares
(``journal_upkeep.UpkeepHost``), not the other way round (``tests/unit/test_architecture.py``).
"""
