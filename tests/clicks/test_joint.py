"""Unbiased LambdaMART: page statistics by brute force; the biases it learns on simulated clicks
(its gradient against a naive loop: test_unbiased_lambdamart.py; DLA: test_dla.py)."""
from __future__ import annotations

import numpy as np
import pytest

from rankwise.clicks import ClickLog, UnbiasedLambdaMART, pages, session_dataset, simulate_clicks_protocol
from rankwise.data import RankingDataset, make_synthetic
from rankwise.errors import NotFittedError


def test_page_counts_by_brute_force():
    docs = [["x", "y", "z"], ["x", "y", "z"], ["y", "x", "z"], ["x", "y", "z"]]
    clicks = [[1, 0, 1], [0, 1, 0], [1, 0, 0], [1, 0, 0]]
    log = ClickLog.from_arrays(["q"] * 4, docs, clicks)
    feats = RankingDataset.from_arrays(np.eye(3, dtype=np.float32), np.zeros(3), ["q"] * 3, doc_ids=["x", "y", "z"])
    with pytest.warns(DeprecationWarning, match="session_dataset"):
        p_off, X, position, c, n_sess, counts, m_off = pages(log, feats)
    assert list(p_off) == [0, 3, 6] and list(n_sess) == [3, 1]
    np.testing.assert_array_equal(position, [1, 2, 3, 1, 2, 3])
    np.testing.assert_array_equal(c, [2, 1, 1, 1, 0, 0])
    np.testing.assert_array_equal(X[3], [0, 1, 0])  # page 2 starts with y
    M = np.zeros((3, 3))
    for s in (0, 1, 3):
        for a in range(3):
            for b in range(3):
                M[a, b] += clicks[s][a] * (1 - clicks[s][b])
    np.testing.assert_array_equal(counts[m_off[0]:m_off[1]].reshape(3, 3), M)


@pytest.fixture(scope="module")
def sim():
    data = make_synthetic(80, n_features=10, list_length=(12, 20), seed=2)
    return simulate_clicks_protocol(data, n_sessions=15000, eta=1.0, top_k=8, production_fraction=0.1, random_state=0)


def test_unbiased_lambdamart_learns_decreasing_bias(sim):
    m = UnbiasedLambdaMART(n_estimators=10, num_leaves=7).fit(session_dataset(sim.log, sim.features))
    assert m.t_plus_[0] == 1.0 and m.t_minus_[0] == 1.0
    assert m.t_plus_[1] < 0.9 and m.t_plus_[-1] < m.t_plus_[1]
    assert np.isfinite(m.predict(sim.features.X)).all()


def test_not_fitted():
    with pytest.raises(NotFittedError):
        UnbiasedLambdaMART().predict(np.zeros((1, 2)))
