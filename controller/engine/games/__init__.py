"""The games, one module each; importing this package registers them by name.

Each module holds a game's profile, options, deck, deal order, misdeal and stub-count
handling, exemptions and round chart, as a subclass of the core engine overriding the
hooks it needs (the pattern of python-chess's ``chess/variant.py``). A new game is a new
module with its subclass: nothing in the core changes.
"""

# isort: skip_file (the bundled games register in the order of the regulations)
from tablectl.controller.engine.games.asia_poker import AsiaPoker
from tablectl.controller.engine.games.five_card_hilo import FiveCardHiLo
from tablectl.controller.engine.games.heads_up_holdem import HeadsUpHoldem
from tablectl.controller.engine.games.three_card_21 import ThreeCard21

__all__ = ["BUNDLED", "AsiaPoker", "FiveCardHiLo", "HeadsUpHoldem", "ThreeCard21"]

BUNDLED = (ThreeCard21, FiveCardHiLo, HeadsUpHoldem, AsiaPoker)
