"""Transports, codecs and device drivers: device bytes in, EVENTS.md events out."""
