"""Scenario files: timed steps that drive a simulator and inject its faults.

A scenario is JSON Lines; blank lines and lines starting with ``#`` are
ignored. Each step is ``{"at": SECONDS, "step": NAME, ...arguments}``, with
``at`` counted from the start of the run::

    {"at": 0.2, "step": "draw", "count": 3}
    {"at": 0.5, "step": "face_up"}
    {"at": 1.0, "step": "garbage", "bytes": 40}
    {"at": 1.5, "step": "disconnect"}
    {"at": 2.5, "step": "reconnect"}

``tablectl sim KIND --scenario FILE`` runs one; docs/protocol.md lists every step.
Errors name the file, the line and what is wrong.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tablectl.drivers.protocol.messages import Fault
from tablectl.simulators.device import SimulatedDevice
from tablectl.simulators.discard_rack import DiscardRackSim
from tablectl.simulators.faults import FaultyWire
from tablectl.simulators.hole_card_reader import HoleCardReaderSim
from tablectl.simulators.shoe import ShoeSim
from tablectl.simulators.shuffler import ShufflerSim


class ScenarioError(ValueError):
    """A scenario file that cannot be run; the message names the file and line."""


class Pluggable(Protocol):
    """An attachment that can pull the cable (in-process, pty): optional."""

    def unplug(self) -> object: ...

    def replug(self) -> object: ...


@dataclass
class Target:
    """What a step acts on."""

    device: SimulatedDevice
    wire: FaultyWire
    cable: Pluggable | None = None


Action = Callable[[Target, dict[str, Any]], None]


@dataclass(frozen=True)
class StepSpec:
    action: Action
    args: dict[str, type | tuple[type, ...]] = field(default_factory=dict)


def _disconnect(t: Target, _: dict[str, Any]) -> None:
    if t.cable is not None:
        t.cable.unplug()
    else:
        t.wire.go_silent()


def _reconnect(t: Target, _: dict[str, Any]) -> None:
    if t.cable is not None:
        t.cable.replug()
    else:
        t.wire.come_back()


def _garbage(t: Target, a: dict[str, Any]) -> None:
    size = a.get("bytes", 32)
    t.wire.garbage(bytes(t.device.rng.randrange(256) for _ in range(size)))


COMMON_STEPS: dict[str, StepSpec] = {
    "garbage": StepSpec(_garbage, {"bytes": int}),
    "bad_crc": StepSpec(lambda t, a: t.wire.bad_crc(a.get("count", 1)), {"count": int}),
    "slow": StepSpec(lambda t, a: t.wire.slow(float(a["seconds"])), {"seconds": (int, float)}),
    "disconnect": StepSpec(_disconnect),
    "reconnect": StepSpec(_reconnect),
    "impostor": StepSpec(
        lambda t, a: t.device.impersonate(a.get("serial"), a.get("firmware_sha256")),
        {"serial": str, "firmware_sha256": str},
    ),
}


def _shuffler(fn: Callable[[ShufflerSim, dict[str, Any]], object]) -> Action:
    def act(t: Target, a: dict[str, Any]) -> None:
        assert isinstance(t.device, ShufflerSim)
        fn(t.device, a)

    return act


def _shoe(fn: Callable[[ShoeSim, dict[str, Any]], object]) -> Action:
    def act(t: Target, a: dict[str, Any]) -> None:
        assert isinstance(t.device, ShoeSim)
        fn(t.device, a)

    return act


def _reader(fn: Callable[[HoleCardReaderSim, dict[str, Any]], object]) -> Action:
    def act(t: Target, a: dict[str, Any]) -> None:
        assert isinstance(t.device, HoleCardReaderSim)
        fn(t.device, a)

    return act


def _rack(fn: Callable[[DiscardRackSim, dict[str, Any]], object]) -> Action:
    def act(t: Target, a: dict[str, Any]) -> None:
        assert isinstance(t.device, DiscardRackSim)
        fn(t.device, a)

    return act


def _draw(shoe: ShoeSim, a: dict[str, Any]) -> None:
    for _ in range(a.get("count", 1)):
        shoe.draw()


KIND_STEPS: dict[str, dict[str, StepSpec]] = {
    "shuffler": {
        "jam": StepSpec(_shuffler(lambda s, a: s.fault(Fault.JAM))),
        "stop": StepSpec(_shuffler(lambda s, a: s.fault(Fault.STOPPED))),
        "incomplete": StepSpec(_shuffler(lambda s, a: s.fault(Fault.INCOMPLETE))),
        "clear_fault": StepSpec(_shuffler(lambda s, a: s.clear_fault())),
        "door_open": StepSpec(_shuffler(lambda s, a: s.set_door(True))),
        "door_closed": StepSpec(_shuffler(lambda s, a: s.set_door(False))),
        "missing_card": StepSpec(_shuffler(lambda s, a: s.missing_card())),
        "extra_card": StepSpec(_shuffler(lambda s, a: s.extra_card())),
        "foreign_card": StepSpec(_shuffler(lambda s, a: s.foreign_card())),
        "load": StepSpec(_shuffler(lambda s, a: s.load())),
    },
    "shoe": {
        "load": StepSpec(_shoe(lambda s, a: s.load(deck=a.get("deck"))), {"deck": str}),
        "draw": StepSpec(_shoe(_draw), {"count": int}),
        "dispense": StepSpec(_shoe(lambda s, a: s.dispense(a.get("size"))), {"size": int}),
        "jam": StepSpec(_shoe(lambda s, a: s.jam())),
        "stop": StepSpec(_shoe(lambda s, a: s.stop())),
        "clear_fault": StepSpec(_shoe(lambda s, a: s.clear_fault())),
        "face_up": StepSpec(_shoe(lambda s, a: s.face_up_next())),
        "missing_card": StepSpec(_shoe(lambda s, a: s.missing_card())),
        "extra_card": StepSpec(_shoe(lambda s, a: s.extra_card())),
        "foreign_card": StepSpec(_shoe(lambda s, a: s.foreign_card())),
    },
    "hole_card_reader": {
        "insert": StepSpec(
            _reader(lambda s, a: s.insert(a["up"], a["hole"])), {"up": str, "hole": str}
        ),
        "fault": StepSpec(_reader(lambda s, a: s.fault())),
        "repair": StepSpec(_reader(lambda s, a: s.repair())),
    },
    "discard_rack": {
        "add": StepSpec(_rack(lambda s, a: s.add(a["cards"])), {"cards": int}),
        "clear": StepSpec(_rack(lambda s, a: s.clear())),
    },
}

REQUIRED_ARGS: dict[str, tuple[str, ...]] = {
    "slow": ("seconds",),
    "insert": ("up", "hole"),
    "add": ("cards",),
}


@dataclass(frozen=True)
class Step:
    at: float
    name: str
    args: dict[str, Any]
    line: int


@dataclass
class Scenario:
    """Parsed steps for one device kind, in time order."""

    kind: str
    steps: list[Step]
    source: str = "<scenario>"

    @classmethod
    def parse(cls, text: str, kind: str, source: str = "<scenario>") -> Scenario:
        if kind not in KIND_STEPS:
            raise ScenarioError(f"{source}: unknown device kind {kind!r}")
        table = COMMON_STEPS | KIND_STEPS[kind]
        steps: list[Step] = []
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            where = f"{source}:{number}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ScenarioError(f"{where}: not JSON: {exc.msg}") from None
            if not isinstance(obj, dict):
                raise ScenarioError(f"{where}: a step must be a JSON object")
            at, name = obj.pop("at", None), obj.pop("step", None)
            if isinstance(at, bool) or not isinstance(at, int | float) or at < 0:
                raise ScenarioError(f"{where}: 'at' must be a number of seconds >= 0, got {at!r}")
            if name not in table:
                allowed = ", ".join(sorted(table))
                raise ScenarioError(f"{where}: unknown step {name!r} for {kind} ({allowed})")
            spec = table[name]
            for key, value in obj.items():
                if key not in spec.args:
                    raise ScenarioError(f"{where}: step {name!r} takes no argument {key!r}")
                expected = spec.args[key]
                if isinstance(value, bool) or not isinstance(value, expected):
                    raise ScenarioError(f"{where}: {name}.{key} has the wrong type: {value!r}")
            for key in REQUIRED_ARGS.get(name, ()):
                if key not in obj:
                    raise ScenarioError(f"{where}: step {name!r} needs {key!r}")
            steps.append(Step(float(at), name, obj, number))
        steps.sort(key=lambda s: (s.at, s.line))
        return cls(kind, steps, source)

    @classmethod
    def load(cls, path: str | Path, kind: str) -> Scenario:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ScenarioError(f"{path}: cannot read: {exc.strerror}") from None
        return cls.parse(text, kind, str(path))

    def start(
        self, target: Target, on_step: Callable[[Step], None] | None = None
    ) -> asyncio.Task[None]:
        """Run the steps on the running loop; the task ends after the last one."""
        table = COMMON_STEPS | KIND_STEPS[self.kind]

        async def run() -> None:
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            for step in self.steps:
                delay = t0 + step.at - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                table[step.name].action(target, step.args)
                if on_step is not None:
                    on_step(step)

        return asyncio.get_running_loop().create_task(run(), name=f"scenario:{self.source}")


SIMULATORS: dict[str, type[SimulatedDevice]] = {
    "shuffler": ShufflerSim,
    "shoe": ShoeSim,
    "hole_card_reader": HoleCardReaderSim,
    "discard_rack": DiscardRackSim,
}
