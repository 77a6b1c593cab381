"""tablectl: the controller daemon of one casino card table."""

__version__ = "0.1.0"
