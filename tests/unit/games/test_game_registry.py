"""A game is one module, end to end, found through the registry (docs/games.md).

Each game's own rules, its citations of the core's rules and its options live in its
module; the core catalogue keeps the rules that name no game, and a lookup by rule ID
still finds every rule. Games are found by name: the bundled ones, one defined in the
program, or one installed with a `tablectl.games` entry point. An unknown name is refused
naming it and the games there are; an installed game whose module fails to load, or that
is no game, is refused naming it, its entry point and why; the other games go on.

The installed games here are real distributions: the example game (examples/high-card-game,
installed by `make venv`) and, per test, a distribution's metadata (`*.dist-info` with its
`entry_points.txt`) written to a temporary folder put on the path, as pip would lay it out.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from tablectl.controller.common.config import ConfigError, parse_config
from tablectl.controller.engine import registry
from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.games import (
    BUNDLED,
    AsiaPoker,
    FiveCardHiLo,
    HeadsUpHoldem,
    ThreeCard21,
)
from tablectl.controller.engine.registry import (
    GameLoadError,
    GameNotFound,
    bundled_game_names,
    find_game,
    game_names,
)
from tablectl.controller.engine.rules import CATALOGUE, CORE_RULES, check_game, citation
from tablectl.controller.engine.table import TableSpec, TableSpecError

ROOT = Path(__file__).resolve().parents[3]
HOUSE = "High Card house rules (example game)"
BUNDLED_NAMES = ("three_card_21", "five_card_hilo", "heads_up_holdem", "asia_poker")

# --- each game's rules, citations and options are in its module ---------------------------

OWN_RULES = {
    ThreeCard21: {"M6", "H1", "H2", "H3", "H4", "H5", "H6", *(f"G{i}" for i in range(1, 10))},
    FiveCardHiLo: {"M1", "M2", "M3", "M7"},
    HeadsUpHoldem: {"M4", "M5"},
    AsiaPoker: {"S4", "A1"},
}


@pytest.mark.parametrize("game", BUNDLED, ids=lambda g: g.name)
def test_a_games_own_rules_are_in_its_module_not_the_core_catalogue(game):
    own = {rule.rule_id for rule in game.rules}
    assert own == OWN_RULES[game]
    assert not own & set(CORE_RULES)
    for rule in game.rules:
        assert CATALOGUE[rule.rule_id] is rule  # the lookup by ID still finds it
    check_game(game)  # its rules and citations are the catalogue's to trace


def test_the_core_catalogue_keeps_the_rules_that_name_no_game():
    assert set(CORE_RULES) == {
        *(f"C{i}" for i in range(1, 12)),
        "S1",
        "S2",
        "S3",
        "H7",
        "D1",
        "D2",
        "D3",
        "D4",
        "R1",
        "X1",
        "X2",
        "Q1",
        "Q2",
        "Q3",
        "L1",
        "L2",
        "L3",
        "E0",
    }
    everything = set(CORE_RULES).union(*OWN_RULES.values())
    assert everything <= set(CATALOGUE)


def test_a_game_cites_the_core_rules_from_its_module():
    assert ThreeCard21.citations["C1"] == "13:69F-2C.14(a)"
    assert citation("C1", "three_card_21", "manual_shoe") == "13:69F-2C.14(a)"
    assert FiveCardHiLo.citations["S1"] == {
        "manual_shoe": "13:69F-40.7(f)",
        "hand": "13:69F-40.8(e)",
        "automated_shoe": "13:69F-40.9(e)",
    }
    assert citation("S1", "five_card_hilo", "hand") == "13:69F-40.8(e)"
    # a rule the game does not cite: the core rule's own citation
    assert "C8" not in AsiaPoker.citations
    assert citation("C8", "asia_poker", "manual_shoe") == CORE_RULES["C8"].default


def test_a_games_options_are_declared_in_its_module():
    assert [o.name for o in ThreeCard21.game_options] == [
        "decks",
        "bart_carter",
        "dealer_hits_soft_17",
        "reader",
    ]
    assert [o.name for o in AsiaPoker.game_options] == ["ap_start", "ap_numbering"]
    spec = TableSpec.from_dict({"game": "three_card_21", "options": {"decks": 8}})
    assert spec.options.decks == 8
    assert dict(spec.options.game_values)["reader"] == "concealed"
    with pytest.raises(TableSpecError, match=r"option reader: 'glass' is not one of none"):
        TableSpec.from_dict({"game": "three_card_21", "options": {"reader": "glass"}})
    with pytest.raises(AttributeError, match="no option 'decks'"):
        _ = TableSpec.from_dict({"game": "five_card_hilo"}).options.decks


# --- the installed example game -------------------------------------------------------------


def test_an_installed_game_is_found_by_its_entry_point():
    assert game_names()[:4] == BUNDLED_NAMES == bundled_game_names()
    assert "high_card" in game_names()
    game = find_game("high_card")
    assert game is importlib.import_module("high_card").HighCard
    assert issubclass(game, Engine)
    assert game.__module__ == "high_card"  # defined outside controller/
    assert Path(sys.modules["high_card"].__file__).is_relative_to(ROOT / "examples")


def test_an_installed_games_rules_citations_and_options_are_its_own():
    find_game("high_card")
    assert CATALOGUE["K1"].summary.startswith("High Card:")
    assert citation("K1", "high_card", "manual_shoe") == f"{HOUSE} 4(b)"
    assert citation("C11", "high_card", "manual_shoe") == f"{HOUSE} 2"
    assert citation("C8", "high_card", "manual_shoe") == CORE_RULES["C8"].default
    spec = TableSpec.from_dict({"game": "high_card", "options": {"dealer_card": False}})
    assert spec.options.dealer_card is False
    with pytest.raises(TableSpecError, match="option dealer_card: must be true or false"):
        TableSpec.from_dict({"game": "high_card", "options": {"dealer_card": "no"}})
    with pytest.raises(TableSpecError, match="option decks: high_card is dealt from one deck"):
        TableSpec.from_dict({"game": "high_card", "options": {"decks": 6}})
    with pytest.raises(TableSpecError, match="option dealer_card: applies only to high_card"):
        TableSpec.from_dict({"game": "five_card_hilo", "options": {"dealer_card": False}})


def _config(game: str, options: str = "") -> dict[str, object]:
    import tomllib

    return tomllib.loads(f'[table]\nid = "t1"\ngame = "{game}"\n[table.options]\n{options}\n')


def test_the_configuration_takes_an_installed_game_and_checks_its_options():
    config = parse_config(_config("high_card", "dealer_card = false"), "t1.toml")
    assert (config.game, config.options["dealer_card"]) == ("high_card", False)
    with pytest.raises(ConfigError) as refused:
        parse_config(_config("high_card", "dealer_card = 3"), "t1.toml")
    assert refused.value.problems == [
        "t1.toml: table.options: option dealer_card: must be true or false, got 3"
    ]


def test_an_unknown_game_is_refused_naming_it_and_the_games_there_are():
    with pytest.raises(GameNotFound) as missing:
        find_game("baccarat")
    assert "'baccarat'" in str(missing.value)
    for name in (*BUNDLED_NAMES, "high_card"):
        assert name in str(missing.value)
    with pytest.raises(ConfigError) as refused:
        parse_config(_config("baccarat"), "t1.toml")
    (problem,) = refused.value.problems
    assert problem.startswith("t1.toml: table.game: 'baccarat' is not allowed; allowed: ")
    assert "'high_card'" in problem and "'asia_poker'" in problem


# --- installed games that are broken --------------------------------------------------------


def _install(folder: Path, dist: str, entry_points: dict[str, str], modules: dict[str, str]):
    """A distribution as pip lays it out: its module files and its .dist-info metadata."""
    info = folder / f"{dist}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = ["[tablectl.games]", *(f"{name} = {value}" for name, value in entry_points.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    for name, text in modules.items():
        (folder / f"{name}.py").write_text(text)


GAME_MODULE = """
from tablectl.controller.engine.core import Engine
from tablectl.controller.engine.rules import Rule
from tablectl.controller.engine.table import GameProfile

class {cls}(Engine):
    name = {name!r}
    profile = GameProfile({name!r}, "test", 4, 1, 1, 0, ("manual_shoe",), False)
    rules = {rules}
    citations = {citations}
"""


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on sys.path whose distributions the entry points see."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    importlib.invalidate_caches()
    yield folder
    importlib.invalidate_caches()


def test_a_game_whose_module_fails_to_load_is_refused_by_name(site):
    _install(
        site,
        "broken_game",
        {"broken": "broken_game_module:Broken"},
        {"broken_game_module": "import tablectl_no_such_dependency\n"},
    )
    assert "broken" in game_names()  # listed by its entry point, not imported
    with pytest.raises(GameLoadError) as refused:
        find_game("broken")
    message = str(refused.value)
    assert message.startswith("game 'broken' cannot be loaded")
    assert "broken_game_module:Broken" in message and "broken_game 1.0" in message
    assert "No module named 'tablectl_no_such_dependency'" in message
    with pytest.raises(ConfigError) as config:
        parse_config(_config("broken"), "t1.toml")
    assert config.value.problems == [f"t1.toml: table.game: {message}"]
    with pytest.raises(TableSpecError, match="game: game 'broken' cannot be loaded"):
        TableSpec.from_dict({"game": "broken"})
    # the other games go on: a broken package takes no other table down
    assert parse_config(_config("heads_up_holdem"), "t1.toml").game == "heads_up_holdem"
    assert TableSpec.from_dict({"game": "high_card"}).game == "high_card"


@pytest.mark.parametrize(
    ("entry", "module", "why"),
    [
        (
            "not_a_game:THING",
            "THING = 42\n",
            "is not a subclass of tablectl.controller.engine.core",
        ),
        (
            "misnamed_game:Misnamed",
            GAME_MODULE.format(cls="Misnamed", name="other_name", rules="()", citations="{}"),
            "the class is named 'other_name'",
        ),
        (
            "clashing_game:Clash",
            GAME_MODULE.format(
                cls="Clash", name="clash", rules="(Rule('C1', 'mine', 'x'),)", citations="{}"
            ),
            "rule C1 is already the catalogue's",
        ),
        (
            "uncited_game:Uncited",
            GAME_MODULE.format(
                cls="Uncited", name="clash", rules="()", citations="{'Z9': 'house rule 1'}"
            ),
            "cites rule 'Z9', which no catalogue has",
        ),
        (
            "badmethod_game:BadMethod",
            GAME_MODULE.format(
                cls="BadMethod", name="clash", rules="()", citations="{'S1': {'shovel': 'x'}}"
            ),
            "the citation of S1 must be a text or one per dealing method",
        ),
    ],
    ids=["not-a-class", "misnamed", "rule-clash", "unknown-rule", "bad-method"],
)
def test_an_installed_game_that_is_no_game_is_refused_by_name(site, entry, module, why):
    _install(site, "odd_game", {"clash": entry}, {entry.partition(":")[0]: module})
    with pytest.raises(GameLoadError, match=f"game 'clash'.*{why}"):
        find_game("clash")
    assert "clash" not in registry._GAMES  # refused, never registered


# --- the commands, each a process of its own ------------------------------------------------


def _tablectl(*args: str, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = None
    if path is not None:
        import os

        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), *sys.path])}
    return subprocess.run(
        [sys.executable, "-m", "tablectl.controller", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
    )


def test_example_config_writes_an_installed_games_config_that_check_config_passes(tmp_path):
    written = _tablectl("example-config", "high_card")
    assert written.returncode == 0, written.stderr
    assert 'game = "high_card"' in written.stdout
    assert "dealer_card = true" in written.stdout  # the game's own option, at its default
    path = tmp_path / "high_card.toml"
    path.write_text(written.stdout)
    checked = _tablectl("check-config", "--file-only", str(path))
    assert checked.returncode == 0, checked.stderr
    assert "game high_card" in checked.stdout
    drawn = _tablectl("diagram", "--game", "high_card")
    assert drawn.returncode == 0, drawn.stderr
    assert "dealing --> showdown: complete_deal" in drawn.stdout


def test_the_commands_name_an_unknown_or_broken_game(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "broken_game", {"broken": "broken_game_module:Broken"}, {})
    config = tmp_path / "t.toml"
    config.write_text(
        '[table]\nid = "t1"\ngame = "broken"\n'
        f'[journal]\npath = "{tmp_path}/j.sqlite"\n[operator]\nsocket = "{tmp_path}/op.sock"\n'
    )
    loading = "game 'broken' cannot be loaded (entry point tablectl.games:broken = "
    for args, status in [
        (("check-config", "--file-only", str(config)), 1),
        (("run", "--config", str(config)), 2),
        (("diagram", "--game", "broken"), 1),
        (("example-config", "broken"), 1),
    ]:
        result = _tablectl(*args, path=site)
        assert result.returncode == status, (args, result.stderr)
        assert loading in result.stderr, (args, result.stderr)
        assert "No module named 'broken_game_module'" in result.stderr
    for args in (("diagram", "--game", "baccarat"), ("example-config", "baccarat")):
        result = _tablectl(*args, path=site)
        assert result.returncode == 2, (args, result.stderr)
        assert "no game named 'baccarat' (available: three_card_21, " in result.stderr
        assert "broken" in result.stderr and "high_card" in result.stderr
