"""USB identities of the reference devices.

0x1209 is the pid.codes vendor id for open hardware; the product ids below are
the reference protocol's own (docs/protocol.md). A vendor's device keeps its
own ids, given in the table's configuration.
"""

from typing import Final

REFERENCE_VENDOR_ID: Final = 0x1209

#: device kind -> product id
REFERENCE_PRODUCT_IDS: Final[dict[str, int]] = {
    "shuffler": 0x7A01,
    "shoe": 0x7A02,
    "hole_card_reader": 0x7A03,
    "discard_rack": 0x7A04,
}

DEVICE_KINDS: Final = tuple(REFERENCE_PRODUCT_IDS)
