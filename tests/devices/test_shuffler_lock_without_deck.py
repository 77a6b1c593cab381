"""A deck lock set while the shuffler holds no shuffled deck holds the next one (protocol.md)."""

from __future__ import annotations

import asyncio

import pytest

from tablectl.drivers.protocol import messages as m
from tablectl.drivers.protocol.messages import ResultCode
from tablectl.simulators.shuffler import ShufflerSim


def test_a_lock_without_a_shuffled_deck_lets_a_shuffle_run_and_holds_its_deck() -> None:
    async def go() -> None:
        sim = ShufflerSim(seed=3, shuffle_seconds=0.01)
        sim.connect(lambda data: None)
        assert sim._cmd_lock(b"") == (ResultCode.OK, "")
        # nothing to release yet: RELEASE_DECK needs a completed shuffle
        assert sim._cmd_release(b"")[0] == ResultCode.WRONG_STATE
        # the lock does not stop a new batch from being shuffled ...
        assert sim._cmd_start(m.pack_deck(None)) == (ResultCode.OK, "")
        for _ in range(100):
            await asyncio.sleep(0.01)
            if sim.state == "ready":
                break
        assert sim.state == "ready"
        # ... but holds its deck: no second shuffle, no taking it, until it is released
        assert sim._cmd_start(m.pack_deck(None)) == (
            ResultCode.WRONG_STATE,
            "the shuffled deck is locked in",
        )
        with pytest.raises(RuntimeError, match="locked"):
            sim.take_deck()
        assert sim._cmd_release(b"") == (ResultCode.OK, "")
        await asyncio.sleep(0)
        assert len(sim.take_deck()) == 52
        sim.disconnect()

    asyncio.run(go())
