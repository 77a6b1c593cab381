"""Short fuzzing in `make test` (hypothesis); `make fuzz` runs the same targets under atheris.

Inputs are random bytes and mutations of the project's own valid files (tests/fuzz/corpus.py),
so both the outer refusals (not UTF-8, not JSON, not TOML) and the deep ones (a bad option,
a bad card in a payload) are reached. The targets' contract is in tests/fuzz/targets.py.
"""

from __future__ import annotations

import copy as copy_module
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tablectl.controller.common.config import ConfigError, load_config, parse_config
from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.events import EVENT_TYPES as SCHEMA
from tablectl.controller.engine.table import TableSpec
from tests.fuzz import targets
from tests.fuzz.corpus import config_seeds, mutate, protocol_seeds, scenario_seeds

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SEEDS = {
    "protocol": protocol_seeds(),
    "scenario": scenario_seeds(),
    "events": scenario_seeds(),
    "config": config_seeds(),
}


def inputs(name: str) -> st.SearchStrategy[bytes]:
    seeds = SEEDS[name]
    mutated = st.builds(
        lambda seed, salt: mutate(seed, random.Random(salt)),
        st.sampled_from(seeds),
        st.integers(0, 2**32),
    )
    return st.one_of(st.binary(max_size=512), mutated)


@pytest.mark.parametrize("name", sorted(targets.TARGETS))
def test_the_seed_corpus_passes(name):
    for seed in SEEDS[name]:
        targets.TARGETS[name](seed)


@FUZZ
@given(inputs("protocol"))
def test_fuzz_protocol(data):
    targets.fuzz_protocol(data)


@FUZZ
@given(inputs("scenario"))
@example(b'{"type": "table", "game": "five_card_hilo"}\n[1, 2]\n')
@example(b'{"at": -1, "step": "draw"}')
def test_fuzz_scenario_files(data):
    targets.fuzz_scenario(data)


@FUZZ
@given(inputs("events"))
def test_fuzz_event_streams(data):
    targets.fuzz_events(data)


@FUZZ
@given(inputs("config"))
@example(b'[table]\nid = "t\xe7"\n')  # not UTF-8: was an uncaught UnicodeDecodeError
def test_fuzz_config_files(data):
    targets.fuzz_config(data)


def test_a_config_file_that_is_not_utf8_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "t01.toml"
    path.write_bytes(b'[table]\nid = "t\xe7"\n')
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert refused.value.problems == [
        f"{path}: not UTF-8 text (TOML must be): byte 15 is invalid continuation byte"
    ]


# -- structured inputs: values of the right shape in the wrong places ----------------------

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats() | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=8,
)
VALID_CONFIG: dict[str, Any] = {
    "table": {"id": "t01", "game": "five_card_hilo", "options": {"dealing": "manual_shoe"}},
    "journal": {"path": "/var/lib/tablectl/t01/journal.sqlite"},
    "metrics": {"listen": "127.0.0.1:8337"},
    "operator": {"socket": "/run/tablectl/t01/operator.sock", "group": "tablectl-op"},
    "devices": {
        "shoe": {
            "kind": "shoe",
            "driver": "reference",
            "transport": {"type": "serial", "port": "/dev/ttyUSB0", "baudrate": 115200},
        }
    },
}


def _paths(tree: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [prefix] if prefix else []
    if isinstance(tree, dict):
        for key, value in tree.items():
            found += _paths(value, (*prefix, key))
    return found


CONFIG_PATHS = _paths(VALID_CONFIG)


def _replaced(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A deep copy of ``tree`` with ``value`` at ``path`` (when the path still leads there)."""
    copy: dict[str, Any] = copy_module.deepcopy(tree)
    node: Any = copy
    for key in path[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node[path[-1]] = value
    return copy


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(CONFIG_PATHS), JSONISH), min_size=1, max_size=3))
def test_fuzz_config_values_are_refused_naming_the_key(changes):
    data = VALID_CONFIG
    for path, value in changes:
        data = _replaced(data, path, value)
    try:
        parse_config(data, "fuzz.toml")
    except ConfigError as error:
        for problem in error.problems:
            assert problem.startswith("fuzz.toml: "), problem
            key = problem.split(": ")[1]
            assert key.split(".")[0] in VALID_CONFIG or "unknown" in problem, problem


EVENT_TYPES = sorted(SCHEMA)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(("three_card_21", "five_card_hilo", "heads_up_holdem", "asia_poker")),
    st.lists(
        st.tuples(
            st.sampled_from(EVENT_TYPES),
            st.dictionaries(
                st.sampled_from(["card", "cards", "count", "deck", "positions", "fault", "dice"]),
                JSONISH | st.sampled_from(["As", "JK", "10h", "Zz", "A", "B"]),
                max_size=3,
            ),
        ),
        max_size=30,
    ),
)
def test_fuzz_engine_events_only_ever_decide(game, stream):
    engine = Engine(TableSpec.from_dict({"game": game}), random_source=random.Random(0).randrange)
    for at, (kind, fields) in enumerate(stream, start=1):
        for decision in engine.handle({"type": kind, **fields}, at):
            row = decision.to_dict()
            assert row["at"] == at and row["rule_id"] and row["reason"]
            if row["decision"] == "rejected":
                assert row["error"].split(":")[0].strip(), row


def test_a_target_fails_on_an_unclear_refusal(monkeypatch):
    """The checks can fail: a loader whose error names no file is caught."""

    def vague(path: Any) -> Any:
        raise ConfigError(["something is wrong"])

    monkeypatch.setattr(targets, "load_config", vague)
    with pytest.raises(AssertionError, match="names no file"):
        targets.fuzz_config(b"[table]\n")
