"""The whole path with real parts: `tablectl witness serve` (a process, a port the kernel
chose) cosigns `tablectl demo --witness`'s rounds; a shipper sends the demo's journal and the
cosigned checkpoints to a real PostgreSQL; `tablectl floor prove` then `tablectl proof
verify` (processes) print round 2's cards; Go's sumdb/tlog and note (tests/gotlog) accept
every inclusion proof and the cosignature of the floor's bundle and reject a tampered one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tablectl.controller.floor.shipper import FloorShipper
from tablectl.simulators.demo import TABLE_KEY_FILE, demo_identity_key, demo_sealing_keys
from tests.demo.demo_helpers import run_demo
from tests.floor.floorkit import FloorDb, unique_table_id, wait_for
from tests.gotlog.test_go_sumdb import flip, go_verdicts
from tests.witness.test_witness_durable import WitnessProcess

TABLECTL = [sys.executable, "-m", "tablectl.controller"]


def tablectl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TABLECTL, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.long
def test_the_demo_with_a_witness_proved_from_the_floor(floor_db: FloorDb, tmp_path: Path) -> None:
    state = tmp_path / "demo"
    state.mkdir()
    demo_sealing_keys(state)
    demo_identity_key(state, "demo")
    table_key = (state / TABLE_KEY_FILE).read_text().strip()
    key_file = tmp_path / "witness.key"
    made = tablectl(
        "witness", "setup-key", "--key", str(key_file), "--name", "regulator.example/w1"
    )
    assert made.returncode == 0, made.stderr
    witness_key = made.stdout.strip()
    witness = WitnessProcess(tmp_path / "witness", key_file, [table_key])
    try:
        url = f"http://127.0.0.1:{witness.port}"
        done = run_demo(state, "--rounds", "3", "--witness", url, "--witness-key", witness_key)
        assert done.returncode == 0, done.stderr[-3000:]
    finally:
        witness.stop()
    journal = state / "journal.sqlite"
    history = next((state / "journal.sqlite.witnessed").glob("*.history")).read_text()
    cosigned = [int(json.loads(line)["note"].split("\n")[1]) for line in history.splitlines()]
    assert len(cosigned) >= 3, cosigned  # the start and the rounds' ends

    table_id = unique_table_id("demo")
    shipper = FloorShipper(table_id, journal, floor_db.provision(table_id), publish_metrics=False)
    shipper.start()
    try:
        wait_for(
            lambda: shipper.rows_behind == 0 and shipper.shipped_checkpoints >= 3,
            60,
            "the demo's rows and its cosigned checkpoints on the floor",
        )
    finally:
        shipper.stop()

    bundle = tmp_path / "round2.json"
    proved = tablectl(
        "floor",
        "prove",
        "--dsn",
        floor_db.admin_dsn,
        "--table",
        table_id,
        "--round",
        "2",
        "--output",
        str(bundle),
    )
    assert proved.returncode == 0, proved.stderr
    checked = tablectl(
        "proof", "verify", str(bundle), "--table-key", table_key, "--witness-key", witness_key
    )
    assert checked.returncode == 0, checked.stderr
    assert "round 2 of tablectl/demo" in checked.stdout
    assert "cosigned by regulator.example/w1" in checked.stdout
    data = json.loads(bundle.read_text())
    cards = [json.loads(r["body"])["card"] for r in data["rows"] if '"card":"' in r["body"]]
    assert cards, "round 2 dealt cards"
    shown = [
        line.split("card=")[1].split()[0] for line in checked.stdout.splitlines() if "card=" in line
    ]
    assert shown == cards

    # someone else's code: Go's sumdb note and tlog on the floor's bundle
    note = data["checkpoint"]
    checks = [{"kind": "cosignature", "note": note, "witness": witness_key}]
    for row in data["rows"]:
        checks.append(
            {
                "kind": "inclusion",
                "note": note,
                "index": row["seq"] - 1,
                "row_hash": row["hash"],
                "proof": row["proof"],
            }
        )
    middle = data["rows"][len(data["rows"]) // 2]
    checks.append(
        {
            "kind": "inclusion",
            "note": note,
            "index": middle["seq"] - 1,
            "row_hash": middle["hash"],
            "proof": [*middle["proof"][:-1], flip(middle["proof"][-1])],
        }
    )
    verdicts = go_verdicts(tmp_path, table_key, checks)
    assert verdicts[:-1] == ["ok"] * (len(checks) - 1), verdicts
    assert verdicts[-1] != "ok"
