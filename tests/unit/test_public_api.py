"""The public APIs (tablectl.games, tablectl.drivers, tablectl.simulators' top level) are all a
game's or a driver's author needs: the two worked examples import nothing else of tablectl,
and the paths of before the packages by layer still work, with a warning, for one release."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = ("tablectl.games", "tablectl.drivers", "tablectl.simulators")

#: run in a fresh interpreter: every import statement executed by a module of the examples
#: (their own packages) that names a tablectl module other than the public ones is refused,
#: whether or not that module was imported before (builtins.__import__ sees every statement)
HIDE_INTERNALS = textwrap.dedent(
    """
    import builtins, importlib, sys
    PUBLIC = {public!r}
    EXAMPLES = ("high_card", "acme_shoe")
    real_import = builtins.__import__
    refused = []

    def guarded(name, globals=None, locals=None, fromlist=(), level=0):
        importer = (globals or {{}}).get("__name__", "")
        if importer.split(".")[0] in EXAMPLES and level == 0 and name.startswith("tablectl"):
            if name not in PUBLIC:
                refused.append(f"{{importer}} imports {{name}}")
                raise ImportError(f"{{importer}}: {{name}} is internal (public: {{PUBLIC}})")
        return real_import(name, globals, locals, fromlist, level)

    builtins.__import__ = guarded
    for module in {modules!r}:
        importlib.import_module(module)
    print("imported", len(refused))
    """
)


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_the_examples_import_only_the_public_apis() -> None:
    modules = ["high_card", "acme_shoe", "acme_shoe.driver", "acme_shoe.simulator"]
    done = run_python(HIDE_INTERNALS.format(public=PUBLIC, modules=modules))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["imported", "0"]


def test_hiding_the_internals_refuses_an_internal_import(tmp_path: Path) -> None:
    """The guard above can fail: an example module importing tablectl.drivers.base."""
    package = tmp_path / "acme_shoe_probe"
    package.mkdir()
    (package / "__init__.py").write_text("from tablectl.drivers.base import Shoe\n")
    code = HIDE_INTERNALS.replace(
        'EXAMPLES = ("high_card", "acme_shoe")', 'EXAMPLES = ("acme_shoe_probe",)'
    )
    code = f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n" + code.format(
        public=PUBLIC, modules=["acme_shoe_probe"]
    )
    done = run_python(code)
    assert done.returncode != 0
    assert "tablectl.drivers.base is internal" in done.stderr


def test_the_example_game_runs_through_the_registry_with_its_game_api() -> None:
    from tablectl.controller.engine.registry import find_game
    from tablectl.games import GAME_API_VERSION

    game = find_game("high_card")
    assert game.game_api == GAME_API_VERSION


def test_a_game_of_another_major_game_api_is_refused_naming_both() -> None:
    import pytest

    from tablectl.controller.engine.registry import GameLoadError, check_game_api
    from tablectl.games import Engine

    class Later(Engine):
        game_api = "3.0"

    with pytest.raises(GameLoadError, match=r"game API 3.0; this tablectl provides 2.0"):
        check_game_api(Later, "'later'")
    Later.game_api = "2.9"
    with pytest.raises(GameLoadError, match=r"game API 2.9"):
        check_game_api(Later, "'later'")
    Later.game_api = "0.9"
    with pytest.raises(GameLoadError, match=r"game API 0.9"):
        check_game_api(Later, "'later'")
    Later.game_api = "one"
    with pytest.raises(GameLoadError, match=r"not MAJOR.MINOR"):
        check_game_api(Later, "'later'")
    # game API 1 is served for one release more, deprecated
    Later.game_api = "1.0"
    with pytest.warns(DeprecationWarning, match=r"game API 1.0, served until tablectl 0.3"):
        check_game_api(Later, "'later'")


def test_the_old_paths_work_for_one_release_with_a_warning() -> None:
    code = textwrap.dedent(
        """
        import warnings
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as caught:
            from tablectl.controller.engine import Engine
            import tablectl.controller.ledger as old_ledger
            from tablectl.controller.games.five_card_hilo import FiveCardHiLo
            from tablectl.controller import journal as old_journal
        from tablectl.controller.engine.core import Engine as NewEngine
        from tablectl.controller.engine import ledger
        from tablectl.controller.engine.games.five_card_hilo import FiveCardHiLo as New
        from tablectl.controller.record import journal
        assert Engine is NewEngine and old_ledger is ledger and FiveCardHiLo is New
        assert old_journal is journal
        assert ledger.__spec__.name == "tablectl.controller.engine.ledger"
        words = [str(w.message) for w in caught if w.category is DeprecationWarning]
        assert any("tablectl.controller.engine.Engine is deprecated" in w for w in words), words
        assert any("tablectl.controller.ledger moved to tablectl.controller.engine.ledger" in w
                   for w in words), words
        assert any("tablectl.controller.games moved" in w for w in words), words
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
