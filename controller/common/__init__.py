"""What the record, the floor and the service share: the table's configuration, structured
logs, Prometheus metrics and the fault points the crash tests aim at.

What it may import: the engine (a configuration names its game and rules). Nothing of the
record, the floor, the service or the commands (``tests/unit/test_architecture.py``).
"""
