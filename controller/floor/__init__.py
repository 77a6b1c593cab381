"""The floor store: every table's journal, shipped row by row into PostgreSQL (docs/floor.md).

`schema` creates the store and its roles (`tablectl floor init`), `shipper` sends a table's
committed rows from the daemon, `store` reads them back for `floor verify`, `compare`,
`round` and `report` (`report` builds the gaming day's CSV and HTML).

What it may import: the engine, ``common`` and the record (a shipped row is a journal row).
Nothing of the service or the commands: the daemon runs the shipper, not the other way round
(``tests/unit/test_architecture.py``).
"""
