"""The command line: ``cli`` (the ``tablectl`` entry point) and one module per subcommand,
with what is built on them (``watch``, the terminal view; ``manuals``, the man pages and
completion generated from the parser; ``replay``; ``diagram``).

What it may import: anything of tablectl. Nothing else imports it
(``tests/unit/test_architecture.py``).
"""
