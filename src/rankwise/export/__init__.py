"""Models out: serving targets (see docs/serving.md)."""
