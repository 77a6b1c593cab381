"""The table's simulated hardware as a process of its own, driven by JSON lines on stdin.

`python -m tests.e2e.rig --game GAME --dir DIR` attaches every device of the game's e2e table
(tests/e2e/tables.py) to a pseudo-terminal, each behind a stable symlink DIR/NAME (as a udev
rule gives /dev/tablectl/NAME), prints one line `{"devices": {name: {kind, port, serial,
firmware_sha256}}}` and then answers one JSON line per request:

  {"do": "shuffle", "deck": null}       the dealer presses the shuffler's button; waits for the end
  {"do": "to_shoe", "deck": null}       the shuffled deck goes from the shuffler into the shoe
  {"do": "call", "device": N, "method": M, "args": [...]}   any simulator method (draw, jam ...)
  {"do": "wire", "device": N, "method": M, "args": [...]}   a wire fault (garbage, bad_crc ...)
  {"do": "step", "device": N, "step": S, ...}  a scenario step (docs/protocol.md): jam, impostor ...
  {"do": "get", "device": N, "attr": A}  a simulator attribute (locked, state ...)
  {"do": "frame", "device": N, "msg": T, "hex": H}  the device sends a frame of type T, payload H
  {"do": "unplug" | "replug", "device": N}
Replies are `{"ok": true, "result": ...}` or `{"ok": false, "error": "..."}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

from tablectl.drivers.protocol.messages import Msg, pack_deck
from tablectl.simulators.device import SimulatedDevice
from tablectl.simulators.discard_rack import DiscardRackSim
from tablectl.simulators.faults import FaultyWire
from tablectl.simulators.hole_card_reader import HoleCardReaderSim
from tablectl.simulators.pty import PtyAttachment
from tablectl.simulators.scenario import COMMON_STEPS, KIND_STEPS, Target
from tablectl.simulators.shoe import ShoeSim
from tablectl.simulators.shuffler import ShufflerSim
from tests.e2e.tables import GAMES


def build(game: str, seed: int, shuffle_seconds: float) -> dict[str, SimulatedDevice]:
    spec = GAMES[game]
    shoe_options = dict(spec["shoe"])
    sims: dict[str, SimulatedDevice] = {}
    for name, kind in spec["devices"].items():
        sim: SimulatedDevice
        if kind == "shuffler":
            sim = ShufflerSim(
                seed=seed,
                decks=shoe_options.get("decks", 1),
                joker=shoe_options.get("joker", False),
                counting=True,
                shuffle_seconds=shuffle_seconds,
            )
        elif kind == "shoe":
            sim = ShoeSim(seed=seed + 1, **shoe_options)
        elif kind == "hole_card_reader":
            sim = HoleCardReaderSim(seed=seed + 2, read_seconds=0.01)
        else:
            sim = DiscardRackSim(seed=seed + 3, noise_um=0)
        sims[name] = sim
    return sims


class Rig:
    def __init__(self, sims: dict[str, SimulatedDevice], directory: Path) -> None:
        loop = asyncio.get_running_loop()
        self.sims = sims
        self.wires = {name: FaultyWire(sim) for name, sim in sims.items()}
        self.attachments = {
            name: PtyAttachment(self.wires[name], loop, link_path=directory / name) for name in sims
        }

    def plug_all(self) -> dict[str, Any]:
        devices = {}
        for name, attachment in self.attachments.items():
            sim = self.sims[name]
            devices[name] = {
                "kind": sim.kind,
                "port": attachment.plug(),
                "serial": sim.identity.serial,
                "firmware_sha256": sim.identity.firmware_sha256,
            }
        return devices

    def _sim(self, kind: str) -> Any:
        return next(sim for sim in self.sims.values() if sim.kind == kind)

    async def answer(self, request: dict[str, Any]) -> Any:
        action = request["do"]
        if action == "shuffle":
            shuffler = self._sim("shuffler")
            _code, text = shuffler._cmd_start(pack_deck(request.get("deck")))
            if text:
                raise RuntimeError(f"shuffler refused to start: {text}")
            if not request.get("wait", True):
                return shuffler.state
            for _ in range(500):
                await asyncio.sleep(0.01)
                if shuffler.state in ("ready", "faulted"):
                    break
            return shuffler.state
        if action == "to_shoe":
            cards = self._sim("shuffler").take_deck()
            self._sim("shoe").load(cards, deck=request.get("deck"))
            return len(cards)
        if action in ("call", "wire"):
            target = (self.sims if action == "call" else self.wires)[request["device"]]
            return getattr(target, request["method"])(*request.get("args", []))
        if action == "step":
            name = request["device"]
            sim = self.sims[name]
            spec = KIND_STEPS[sim.kind].get(request["step"]) or COMMON_STEPS[request["step"]]
            arguments = {k: v for k, v in request.items() if k not in ("do", "device", "step")}
            spec.action(Target(sim, self.wires[name], self.attachments[name]), arguments)
            return None
        if action == "get":
            return getattr(self.sims[request["device"]], request["attr"])
        if action == "frame":
            self.sims[request["device"]].send_frame(
                Msg(request["msg"]), bytes.fromhex(request["hex"])
            )
            return None
        if action == "unplug":
            self.attachments[request["device"]].unplug()
            return None
        if action == "replug":
            return self.attachments[request["device"]].plug()
        raise ValueError(f"unknown request {action!r}")


async def main(args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    rig = Rig(build(args.game, args.seed, args.shuffle_seconds), Path(args.dir))
    print(json.dumps({"devices": rig.plug_all()}), flush=True)
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while not stop.is_set():
        line_task = asyncio.ensure_future(reader.readline())
        stop_task = asyncio.ensure_future(stop.wait())
        await asyncio.wait({line_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
        stop_task.cancel()
        if not line_task.done():
            line_task.cancel()
            break
        line = line_task.result()
        if not line:
            break
        try:
            reply: dict[str, Any] = {"ok": True, "result": await rig.answer(json.loads(line))}
        except Exception as error:  # a bad request is answered, never fatal
            reply = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        print(json.dumps(reply, default=str), flush=True)
    for attachment in rig.attachments.values():
        attachment.close()
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--game", required=True, choices=sorted(GAMES))
    parser.add_argument("--dir", required=True)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--shuffle-seconds", type=float, default=0.05)
    sys.exit(asyncio.run(main(parser.parse_args())))
