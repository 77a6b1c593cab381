"""The conformance kit: `tablectl conformance KIND --driver NAME [--port P]` and a pytest plugin."""

from tablectl.simulators.conformance.kit import Report, Row, conformance, resolve, run_conformance

__all__ = ["Report", "Row", "conformance", "resolve", "run_conformance"]
