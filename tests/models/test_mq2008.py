"""Smoke test on real data: MQ2008 Fold1 (the quality comparison with peers belongs to benchmarks/)."""
from __future__ import annotations

import pytest

from rankwise.data import read_svmlight
from rankwise.models import GBDTRanker, LinearRanker


@pytest.mark.realdata
def test_mq2008_fold1_models_rank_well(mq2008_dir):
    tr = read_svmlight(mq2008_dir / "Fold1" / "train.txt.gz")
    te = read_svmlight(mq2008_dir / "Fold1" / "test.txt.gz")
    ours = GBDTRanker("lambdaloss", n_estimators=50, learning_rate=0.05, random_state=0).fit(tr).score(te)
    native = GBDTRanker("native:lambdarank", n_estimators=50, learning_rate=0.05, random_state=0).fit(tr).score(te)
    linear = LinearRanker("listnet", alpha=1e-3).fit(tr).score(te)
    # published LETOR 4.0 baselines on MQ2008 report NDCG@10 around 0.45-0.5 with empty queries 0
    assert ours > 0.40 and linear > 0.40 and native > 0.40
