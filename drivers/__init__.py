"""Transports, codecs and device drivers: device bytes in, docs/events.md events out."""
