"""`tablectl demo --witness URL --witness-key VKEY` against a witness of its own (a real
`tablectl witness serve` process on a port the kernel chose): the demo's rounds are cosigned,
the resumed demo starts against what the witness holds, and `journal verify --witness-key`
reports the span the witness proves; a round of it proved (`journal prove`) and checked
offline with the table's and the witness's keys (`proof verify`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tablectl.simulators.demo import TABLE_KEY_FILE, demo_identity_key, demo_sealing_keys
from tests.demo.demo_helpers import run_demo
from tests.witness.logs import latest
from tests.witness.test_witness_durable import WitnessProcess

TABLECTL = [sys.executable, "-m", "tablectl.controller"]


def test_the_demo_with_a_witness(tmp_path: Path) -> None:
    state = tmp_path / "demo"
    state.mkdir()
    demo_sealing_keys(state)
    demo_identity_key(state, "demo")  # the table's key, before the witness is told of it
    table_key = (state / TABLE_KEY_FILE).read_text().strip()
    key_file = tmp_path / "witness.key"
    made = subprocess.run(
        [
            *TABLECTL,
            "witness",
            "setup-key",
            "--key",
            str(key_file),
            "--name",
            "regulator.example/w1",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    witness_key = made.stdout.strip()
    origin = table_key.split("+", 1)[0]

    witness = WitnessProcess(tmp_path / "witness", key_file, [table_key])
    try:
        url = f"http://127.0.0.1:{witness.port}"
        done = run_demo(state, "--rounds", "4", "--witness", url, "--witness-key", witness_key)
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"witnessed by {url}: the table's key is {table_key}" in done.stdout
        status, cosigned = latest(witness.port, origin)
        assert status == 200, cosigned
        first = int(cosigned.split("\n")[1])
        assert first > 0
        # resumed: the start checks the journal against the witness; the rest is cosigned
        again = run_demo(state, "--rounds", "2", "--witness", url, "--witness-key", witness_key)
        assert again.returncode == 0, again.stderr[-3000:]
        status, cosigned = latest(witness.port, origin)
        assert int(cosigned.split("\n")[1]) > first
        verified = subprocess.run(
            [
                *TABLECTL,
                "journal",
                "verify",
                str(state),
                "--witness-key",
                witness_key,
                "--table-key",
                table_key,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert verified.returncode == 0, verified.stderr
        assert "witnessed: rows 1-" in verified.stdout
        # a round of it proved, and the proof checked offline with both keys (README)
        bundle = tmp_path / "round2.json"
        proved = subprocess.run(
            [*TABLECTL, "journal", "prove", str(state), "--round", "2", "--output", str(bundle)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proved.returncode == 0, proved.stderr
        checked = subprocess.run(
            [
                *TABLECTL,
                "proof",
                "verify",
                str(bundle),
                "--table-key",
                table_key,
                "--witness-key",
                witness_key,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert checked.returncode == 0, checked.stderr
        assert "regulator.example/w1" in checked.stdout
    finally:
        witness.stop()
