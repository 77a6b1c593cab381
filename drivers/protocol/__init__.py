"""The reference protocol: framing (frame), payloads (messages), link layer (link)."""

from tablectl.drivers.protocol.frame import (
    DecodeError,
    DecodeResult,
    Frame,
    decode,
    decode_verbose,
    encode,
)
from tablectl.drivers.protocol.link import Link, LinkFailure, LinkSettings
from tablectl.drivers.protocol.messages import Identity, Msg, PayloadError

__all__ = [
    "DecodeError",
    "DecodeResult",
    "Frame",
    "Identity",
    "Link",
    "LinkFailure",
    "LinkSettings",
    "Msg",
    "PayloadError",
    "decode",
    "decode_verbose",
    "encode",
]
