"""The four simulated devices of one table, with the cards moving between them.

The dealer's hands are the glue: the shuffled deck is lifted out of the
shuffler into the shoe, dealt cards are in play, collected cards go to the
discard rack (whose sensor level rises), and the rack's cards go back into the
shuffler. Used by demos and soak runs; each device is still attached on its own
(pty, pyusb backend or in-process) and driven by its production driver.
"""

from __future__ import annotations

from tablectl.simulators.device import SimulatedDevice
from tablectl.simulators.discard_rack import DiscardRackSim
from tablectl.simulators.hole_card_reader import HoleCardReaderSim
from tablectl.simulators.shoe import ShoeSim
from tablectl.simulators.shuffler import ShufflerSim


class SimulatedTable:
    """A shuffler, a shoe, a hole-card reader and a discard rack sharing one set of cards."""

    def __init__(
        self,
        *,
        seed: int = 0,
        decks: int = 1,
        joker: bool = False,
        automated_shoe: bool = False,
        counting: bool = True,
        stack_size: int = 5,
        shuffle_seconds: float = 0.4,
    ) -> None:
        self.shuffler = ShufflerSim(
            seed=seed,
            decks=decks,
            joker=joker,
            counting=counting,
            shuffle_seconds=shuffle_seconds,
        )
        self.shoe = ShoeSim(
            seed=seed + 1,
            automated=automated_shoe,
            decks=decks,
            joker=joker,
            stack_size=stack_size,
        )
        self.reader = HoleCardReaderSim(seed=seed + 2)
        self.rack = DiscardRackSim(seed=seed + 3)
        self.in_play: list[str] = []
        self.discards: list[str] = []

    @property
    def devices(self) -> dict[str, SimulatedDevice]:
        return {
            "shuffler": self.shuffler,
            "shoe": self.shoe,
            "hole_card_reader": self.reader,
            "discard_rack": self.rack,
        }

    def shuffled_deck_to_shoe(self, deck: str | None = None) -> None:
        """Lift the shuffled deck out of the shuffler (it must be released) into the shoe."""
        self.shoe.load(self.shuffler.take_deck(), deck)

    def draw(self) -> str | None:
        card = self.shoe.draw()
        if card is not None:
            self.in_play.append(card)
        return card

    def dispense(self, size: int | None = None) -> list[str] | None:
        stack = self.shoe.dispense(size)
        if stack is not None:
            self.in_play.extend(stack)
        return stack

    def collect_round(self) -> int:
        """The round's cards go to the discard rack; returns how many."""
        count = len(self.in_play)
        self.discards.extend(self.in_play)
        self.in_play.clear()
        self.rack.add(count)
        return count

    def cards_back_to_shuffler(self) -> None:
        """The rack and the shoe's stub go back into the shuffler for the next shuffle."""
        self.shuffler.load([*self.discards, *self.shoe.cards])
        self.discards.clear()
        self.shoe.cards = []
        self.rack.clear()
