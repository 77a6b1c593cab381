"""The pure codec, under the name DESIGN.md gives it: see drivers.protocol.frame."""

from tablectl.drivers.protocol.frame import Frame, decode, decode_verbose, encode

__all__ = ["Frame", "decode", "decode_verbose", "encode"]
