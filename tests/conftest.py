"""Shared fixtures: where the real data lives, and a skip with a clear message where it is absent."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path | None:
    env = os.environ.get("RANKWISE_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "data")
    for c in candidates:
        if c.is_dir():
            return c
    return None


@pytest.fixture(scope="session")
def data_dir() -> Path:
    d = shared_data_dir()
    if d is None:
        pytest.skip("real data absent: set RANKWISE_DATA or place the data sets in ../shared/data "
                    "(MQ2008/Fold1..5, lightgbm_lambdarank, ml-100k)")
    return d


@pytest.fixture(scope="session")
def mq2008_dir(data_dir) -> Path:
    d = data_dir / "MQ2008"
    if not (d / "Fold1" / "train.txt.gz").exists():
        pytest.skip(f"MQ2008 absent: expected {d}/Fold1..5/{{train,vali,test}}.txt.gz")
    return d
