"""Models trained once per session on MQ2008 Fold1 with rankwise losses, for the export tests."""
from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="session")
def mq_fold1(mq2008_dir):
    from rankwise.data.svmlight import read_svmlight

    return read_svmlight(mq2008_dir / "Fold1" / "train.txt.gz"), read_svmlight(mq2008_dir / "Fold1" / "test.txt.gz")


@pytest.fixture(scope="session")
def mq_names():
    return [f"mq_{i + 1}" for i in range(46)]


def _with_nan(X, share, seed):
    X = np.array(X, dtype=np.float64)
    X[np.random.default_rng(seed).random(X.shape) < share] = np.nan
    return X


@pytest.fixture(scope="session")
def gbdt_models(mq_fold1):
    """{(backend, with_nan): GBDTRanker}: lambdarank (a rankwise loss), 60 trees; with_nan trains on 5% NaN."""
    from rankwise.models.gbdt import GBDTRanker

    train, _ = mq_fold1
    out = {}
    for backend in ("lightgbm", "xgboost"):
        for with_nan in (False, True):
            X = _with_nan(train.X, 0.05, 1) if with_nan else train.X
            out[backend, with_nan] = GBDTRanker("lambdarank", backend=backend, n_estimators=60, n_jobs=1,
                                                random_state=0, verbose=False).fit(X, train.labels, qid=train.qid)
    return out


@pytest.fixture(scope="session")
def linear_model(mq_fold1):
    from rankwise.models.linear import LinearRanker

    train, _ = mq_fold1
    return LinearRanker("listnet", random_state=0).fit(train)


@pytest.fixture(scope="session")
def test_with_nan(mq_fold1):
    return _with_nan(mq_fold1[1].X, 0.05, 2)


@pytest.fixture(scope="session")
def xgb_margin():
    """``xgb_margin(model, X)``: XGBoost's own margin (its float32 sum of the leaves, from the base margin) of
    rows read as float32, over the rounds ``predict`` uses. The float32 targets reproduce it bit for bit;
    ``GBDTRanker.predict`` sums the same leaves in double."""
    def margin(model, X):
        import xgboost as xgb

        best = getattr(model, "best_iteration_", None)
        X32 = np.asarray(X, dtype=np.float64).astype(np.float32)
        return model.booster_.predict(xgb.DMatrix(X32, missing=np.nan), output_margin=True,
                                      iteration_range=(0, 0) if best is None else (0, best + 1)).astype(np.float64)
    return margin
