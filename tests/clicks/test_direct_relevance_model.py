"""direct_relevance's regression is a configured rankwise model (estimator=), cross-fitted by query."""
from __future__ import annotations

import numpy as np
import pytest

from rankwise.clicks import click_dataset, direct_relevance
from rankwise.errors import InputError
from rankwise.models import GBDTRanker, LinearRanker

from test_select_clip import simulated  # pytest puts a test file's folder on sys.path


@pytest.fixture(scope="module")
def case():
    return simulated(reverse=False, n_queries=30, n_docs=6, sessions=400)


def test_default_is_a_pointwise_squared_gbdt_cross_fitted_by_query(case):
    """The default equals the explicit GBDTRanker, and each fold's m is that model fitted on the other folds'
    IPS labels (the folds: a permutation of the logged queries, as before)."""
    counts, feats, theta = case
    m = direct_relevance(counts, feats, theta, n_folds=3, n_estimators=20, random_state=4)
    gb = GBDTRanker("pointwise_squared", n_estimators=20, learning_rate=0.05, num_leaves=31, random_state=4)
    np.testing.assert_array_equal(m, direct_relevance(counts, feats, theta, estimator=gb, n_folds=3, random_state=4))
    data = click_dataset(counts, feats, propensity=theta)
    fold_q = np.random.default_rng(4).permutation(data.n_queries) % 3
    fq = np.repeat(np.asarray(feats.query_ids), np.diff(feats.query_offsets))
    fold_of = dict(zip(np.asarray(data.query_ids), fold_q))
    rows = np.array([fold_of.get(q, -1) == 1 for q in fq])
    want = gb.fit(data.take(np.flatnonzero(fold_q != 1))).predict(feats.X[rows])
    np.testing.assert_allclose(m[rows], want, rtol=1e-12)


def test_any_rankwise_model_and_threads(case):
    counts, feats, theta = case
    lin = direct_relevance(counts, feats, theta, estimator=LinearRanker("pointwise_squared", max_iter=50), n_folds=3)
    assert np.corrcoef(lin, np.asarray(feats.X)[:, 0])[0, 1] > 0.8  # feature 0 is the relevance here
    one = direct_relevance(counts, feats, theta, n_folds=3, n_estimators=10, n_jobs=1)
    two = direct_relevance(counts, feats, theta, n_folds=3, n_estimators=10, n_jobs=2)
    np.testing.assert_allclose(one, two, rtol=1e-10, atol=1e-12)
    with pytest.raises(InputError, match="estimator must be a rankwise model"):
        direct_relevance(counts, feats, theta, estimator="gbdt")
