"""The daemon and everything that touches sockets, devices, metrics' endpoint and systemd:
the table service (engine + journal + devices), the operator socket and its client, sd_notify,
preflight checks, the wording of the status interface, the package's shipped resources.

What it may import: the engine, ``common``, the record and the floor (the daemon runs the
floor's shipper). Nothing of the commands (``tests/unit/test_architecture.py``).
"""
