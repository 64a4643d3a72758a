"""Fixtures of the data tests: the MovieLens 100k folder (skips with a message where it is absent)."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ml_dir(data_dir):
    d = data_dir / "ml-100k"
    if not (d / "u.data").exists():
        pytest.skip(f"MovieLens 100k absent: expected {d}/u.data")
    return d
