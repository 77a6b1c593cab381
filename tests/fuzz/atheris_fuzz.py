"""Coverage-guided fuzzing with atheris (libFuzzer) of the targets in tests/fuzz/targets.py.

    python -m tests.fuzz.atheris_fuzz TARGET [libFuzzer options, e.g. -max_total_time=300]

TARGET is one of protocol, scenario, events, config. The seed corpus (the project's own
valid files) is written to .fuzz/TARGET/ and the fuzzer keeps what it finds there; crashes
land in .fuzz/ as crash-* files (replay one with `python -m tests.fuzz.atheris_fuzz TARGET
.fuzz/crash-...`). `make fuzz` runs every target; atheris is in the `fuzz` extra.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

# Instrumented before anything imports them, so that the fuzzer sees their branches.
with atheris.instrument_imports(include=["tablectl"]):
    from tests.fuzz import targets
    from tests.fuzz.corpus import config_seeds, protocol_seeds, scenario_seeds

SEEDS = {
    "protocol": protocol_seeds,
    "scenario": scenario_seeds,
    "events": scenario_seeds,
    "config": config_seeds,
}


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[1] not in SEEDS:
        raise SystemExit(f"usage: {argv[0]} {{{','.join(SEEDS)}}} [libFuzzer options]")
    name = argv[1]
    corpus = Path(".fuzz") / name
    corpus.mkdir(parents=True, exist_ok=True)
    for index, seed in enumerate(SEEDS[name]()):
        (corpus / f"seed-{index}").write_bytes(seed)
    target = targets.TARGETS[name]
    options = list(argv[2:])
    if not any(not a.startswith("-") for a in options):
        options.append(str(corpus))
    if not any(a.startswith("-artifact_prefix=") for a in options):
        options.append(f"-artifact_prefix=.fuzz/{name}-")
    atheris.Setup([argv[0], *options], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
