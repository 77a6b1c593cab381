"""Device simulators: they speak the drivers' protocol from the device side.

This package's top level is the simulator author's API (docs/drivers.md, "The simulator"):
what a vendor's simulator may import — tablectl's model of each device kind, the base that
puts a vendor's wire in front of it, the pty attachment and the keywords each kind takes. It
follows the driver API's version (``tablectl.drivers.DRIVER_API_VERSION``); the submodules
behind it are internal.
"""

from __future__ import annotations

from tablectl.simulators.discard_rack import DiscardRackSim
from tablectl.simulators.hole_card_reader import HoleCardReaderSim
from tablectl.simulators.pty import PtyAttachment
from tablectl.simulators.registry import KIND_KEYWORDS
from tablectl.simulators.shoe import ShoeSim
from tablectl.simulators.shuffler import ShufflerSim
from tablectl.simulators.vendor import Report, VendorSimulator

__all__ = [
    "KIND_KEYWORDS",
    "DiscardRackSim",
    "HoleCardReaderSim",
    "PtyAttachment",
    "Report",
    "ShoeSim",
    "ShufflerSim",
    "VendorSimulator",
]
