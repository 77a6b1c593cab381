"""`tablectl status` words for the table's witnesses (the daemon's status["witnesses"])."""

from __future__ import annotations

from tablectl.controller.service.status_words import degraded_reasons, describe, witness_lines

STATUS = {
    "quorum": 1,
    "quorum_cosigned_size": 120,
    "witnesses": {
        "regulator.example/w1": {
            "url": "http://10.0.0.5:7380",
            "cosigned_size": 120,
            "behind_checkpoints": 2,
            "refused": None,
            "last_error": "connection refused",
        },
        "floor.example/w2": {
            "url": "http://10.0.0.6:7380",
            "cosigned_size": 90,
            "behind_checkpoints": 1,
            "refused": "the journal's tree of 130 rows is not an extension of the tree of 90",
            "last_error": None,
        },
    },
}


def test_each_witness_is_said_and_a_refusal_degrades_the_table() -> None:
    lines = witness_lines(STATUS)
    assert lines[0] == "witnesses (quorum 1; 120 rows cosigned by the quorum):"
    assert lines[1] == (
        "  regulator.example/w1 (http://10.0.0.5:7380): cosigned 120 rows, 2 checkpoint(s) "
        "behind; last error: connection refused"
    )
    assert lines[2].startswith("  floor.example/w2 (http://10.0.0.6:7380): REFUSES THE JOURNAL:")
    status = {"devices": {}, "interlocks": {}, "witnesses": STATUS}
    assert "witness floor.example/w2 refuses the journal" in degraded_reasons(status)
    assert lines[0] in describe({**status, "devices": {}})
    assert witness_lines(None) == []
