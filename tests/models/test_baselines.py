"""PopularityRanker / ItemMeanRanker / FeatureRanker: the rankers' contract around one feature column."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import rankwise
from rankwise.data import RankingDataset
from rankwise.errors import InputError, NotFittedError
from rankwise.models import FeatureRanker, ItemMeanRanker, PopularityRanker


def _ds():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3)).astype(np.float32)
    qid = np.repeat(np.arange(8), 5)
    y = (X[:, 1] > 0).astype(float)
    return RankingDataset.from_arrays(X, y, qid, feature_names=["a", "item_count", "item_mean_rating"])


def test_scores_are_the_named_column():
    ds = _ds()
    pop = PopularityRanker().fit(ds)
    assert pop.feature_index_ == 1
    np.testing.assert_array_equal(pop.predict(ds.X), ds.X[:, 1].astype(np.float64))
    mean = ItemMeanRanker().fit(ds, eval_set=ds)
    np.testing.assert_array_equal(mean.predict(ds.X), ds.X[:, 2])
    assert mean.history_["ndcg@10"][0] == pytest.approx(mean.score(ds.X, ds.labels, qid=ds.qid))
    asc = FeatureRanker(0, ascending=True).fit(ds.X, ds.labels, qid=ds.qid)
    np.testing.assert_array_equal(asc.predict(ds.X), -ds.X[:, 0].astype(np.float64))
    frame = pd.DataFrame(ds.X, columns=ds.feature_names)
    assert FeatureRanker("item_mean_rating").fit(frame, ds.labels, qid=ds.qid).feature_index_ == 2


def test_errors():
    ds = _ds()
    with pytest.raises(InputError, match="feature='item_count' is a column name but X has no feature names"):
        PopularityRanker().fit(ds.X, ds.labels, qid=ds.qid)
    with pytest.raises(InputError, match=r"feature='nope' is not a column of X; its columns are \['a'"):
        FeatureRanker("nope").fit(ds)
    with pytest.raises(InputError, match="feature=7 is out of range for X with 3 features"):
        FeatureRanker(7).fit(ds)
    with pytest.raises(NotFittedError):
        PopularityRanker().predict(ds.X)
    with pytest.raises(InputError, match="X has 2 features,? but PopularityRanker .*3"):
        PopularityRanker().fit(ds).predict(ds.X[:, :2])


def test_save_and_load(tmp_path):
    ds = _ds()
    m = ItemMeanRanker().fit(ds)
    m.save(tmp_path / "m.npz")
    back = rankwise.load(tmp_path / "m.npz")
    assert type(back) is ItemMeanRanker and back.feature_index_ == 2
    np.testing.assert_array_equal(back.predict(ds.X), m.predict(ds.X))
