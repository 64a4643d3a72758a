"""NeuralRanker: learning, permutation equivariance of the attention scorer, determinism, resume."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from _model_data import make_data
from reference.models_reference import mean_ndcg
from rankwise.errors import InputError
from rankwise.models import NeuralRanker


@pytest.mark.parametrize("architecture", ["mlp", "attention"])
def test_learns_better_than_random_and_is_deterministic(architecture):
    (X, y, qid), (Xt, yt, qt) = make_data(seed=0), make_data(seed=1)
    kw = dict(loss="listnet", architecture=architecture, hidden=(16, 8), max_iter=15, learning_rate=5e-3, random_state=0)
    a = NeuralRanker(**kw).fit(X, y, qid=qid)
    b = NeuralRanker(**kw).fit(X, y, qid=qid)
    pa = a.predict(Xt, qid=qt)
    np.testing.assert_array_equal(pa, b.predict(Xt, qid=qt))
    rand = np.random.default_rng(0).normal(size=len(yt))
    assert a.score(Xt, yt, qid=qt) > mean_ndcg(rand, yt, qt) + 0.2
    assert a.history_["loss"][-1] < a.history_["loss"][0]


def test_attention_scores_are_permutation_equivariant_and_use_context():
    X, y, qid = make_data(n_queries=10, list_len=6)
    m = NeuralRanker("listnet", architecture="attention", hidden=(8,), max_iter=2, random_state=0, dropout=0.0)
    m.fit(X, y, qid=qid)
    s = m.predict(X, qid=qid)
    p = np.random.default_rng(1).permutation(len(y))
    np.testing.assert_allclose(m.predict(X[p], qid=qid[p]), s[p], atol=1e-5)
    # the score of a document depends on the other documents of its query
    X2 = X.copy()
    X2[1] += 3.0
    s2 = m.predict(X2, qid=qid)
    assert abs(s2[0] - s[0]) > 1e-4 and np.allclose(s2[6:], s[6:], atol=1e-6)
    with pytest.raises(InputError, match=r"call predict\(X, qid=qid\)"):
        m.predict(X)


def test_padding_does_not_change_attention_scores():
    # a query scored alone equals the same query scored in a batch padded to a longer list
    X, y, qid = make_data(n_queries=4, list_len=6)
    qid = qid.copy()
    keep = np.ones(len(y), bool)
    keep[:3] = False  # query 0 has 3 documents, the others 6
    m = NeuralRanker("listnet", architecture="attention", hidden=(8,), max_iter=1, random_state=0, dropout=0.0)
    m.fit(X[keep], y[keep], qid=qid[keep])
    together = m.predict(X[keep], qid=qid[keep])
    alone = m.predict(X[3:6], qid=qid[3:6])
    np.testing.assert_allclose(together[:3], alone, atol=1e-5)


def test_checkpoint_resume_equals_uninterrupted_run(tmp_path):
    X, y, qid = make_data(n_queries=20, list_len=6)
    kw = dict(loss="ranknet", hidden=(8,), dropout=0.2, random_state=5, batch_queries=4)
    full = NeuralRanker(max_iter=4, **kw).fit(X, y, qid=qid)
    ck = tmp_path / "ck.npz"
    NeuralRanker(max_iter=2, **kw).fit(X, y, qid=qid, checkpoint=ck)
    resumed = NeuralRanker(max_iter=4, **kw).fit(X, y, qid=qid, resume=ck)
    np.testing.assert_allclose(resumed.predict(X), full.predict(X), atol=1e-6)
    assert resumed.history_["epoch"] == [0, 1, 2, 3]


def test_early_stopping_restores_best_epoch():
    (X, y, qid), (Xv, yv, qv) = make_data(seed=0), make_data(seed=1)
    m = NeuralRanker("listnet", hidden=(16,), max_iter=40, learning_rate=0.05, early_stopping_rounds=3, random_state=0)
    m.fit(X, y, qid=qid, eval_set=(Xv, yv, qv))
    vals = m.history_["ndcg@10"]
    assert vals[m.best_iteration_] == max(vals)
    assert m.score(Xv, yv, qid=qv) == pytest.approx(max(vals), abs=1e-6)


def test_bad_parameters():
    X, y, qid = make_data(n_queries=5, list_len=4)
    with pytest.raises(InputError, match="architecture must be one of"):
        NeuralRanker(architecture="rnn").fit(X, y, qid=qid)
    with pytest.raises(InputError, match="divisible by n_heads"):
        NeuralRanker(architecture="attention", hidden=(7,), n_heads=2).fit(X, y, qid=qid)
    with pytest.raises(InputError, match=r"dropout must be a finite number in \[0, 1\)"):
        NeuralRanker(dropout=1.5).fit(X, y, qid=qid)
    with pytest.raises(InputError, match="max_iter must be an integer >= 1"):
        NeuralRanker(max_iter=0).fit(X, y, qid=qid)


def test_resume_with_other_features_is_refused(tmp_path):
    X, y, qid = make_data(n_queries=10, list_len=5)
    ck = tmp_path / "ck.npz"
    NeuralRanker(hidden=(4,), max_iter=1, random_state=0).fit(X, y, qid=qid, checkpoint=ck)
    with pytest.raises(InputError, match=r"the checkpoint was fitted on 6 features but X has 7"):
        NeuralRanker(hidden=(4,), max_iter=2, random_state=0).fit(np.hstack([X, X[:, :1]]), y, qid=qid, resume=ck)


def test_resume_from_a_finished_checkpoint_keeps_it(tmp_path):
    X, y, qid = make_data(n_queries=10, list_len=5)
    ck = tmp_path / "ck.npz"
    done = NeuralRanker(hidden=(4,), max_iter=2, random_state=0).fit(X, y, qid=qid, checkpoint=ck)
    again = NeuralRanker(hidden=(4,), max_iter=2, random_state=0).fit(X, y, qid=qid, resume=ck)
    np.testing.assert_array_equal(again.predict(X), done.predict(X))
    assert again.history_ == done.history_
