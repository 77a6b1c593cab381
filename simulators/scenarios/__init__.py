"""Bundled scenarios, one per game: a first look at the rules without any device."""

from __future__ import annotations

from importlib import resources

from tablectl.controller.engine.registry import bundled_game_names


def scenario_text(game: str) -> str:
    """The bundled scenario of ``game`` (JSON Lines, docs/events.md)."""
    return resources.files(__package__).joinpath(f"{game}.jsonl").read_text(encoding="utf-8")


def bundled() -> dict[str, str]:
    return {game: scenario_text(game) for game in bundled_game_names()}
