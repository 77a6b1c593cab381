"""The floor store: every table's journal, shipped row by row into PostgreSQL (docs/floor.md).

`schema` creates the store and its roles (`tablectl floor init`), `shipper` sends a table's
committed rows from the daemon, `store` reads them back for `floor verify`, `compare`,
`round` and `report` (`report` builds the gaming day's CSV and HTML).
"""
