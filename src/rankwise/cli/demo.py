"""``rankwise demo``: what a newcomer needs to see, on a built-in data set (no files needed)."""
from __future__ import annotations


def run_demo(args) -> int:
    print("rankwise demo: the data layer and models are being built; see README.md.")
    return 0
