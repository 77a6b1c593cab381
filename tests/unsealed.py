"""The one line a test table's configuration carries when the test is not about sealing.

A table is sealed by default: `tablectl run` and `check-config` refuse one without its sealing
key (docs/journal.md). Tests that start a table for anything else say, in the words the
configuration requires, that its journal goes unsealed; the sealing tests set up keys.
"""

#: under `[journal]`
UNSEALED = 'sealing = "off"'
