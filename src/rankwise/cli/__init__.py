"""The ``rankwise`` command line: a thin layer over the public API."""
from rankwise.cli.main import main

__all__ = ["main"]
