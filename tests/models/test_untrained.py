"""Issue 28, defect 4: models that came back untrained without a word.

``LinearRanker(loss="lambdarank")`` with L-BFGS stopped after one iteration at w = 0 on raw,
heavy-tailed (MSLR-like) features; now the default solver suits the loss (``solver="auto"``), and
every trainer warns (``UntrainedModelWarning``, ``untrained_``) when its model ranks like a
constant or never left its start.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from _model_data import make_data, make_heavy_tailed
from rankwise.errors import UntrainedModelWarning
from rankwise.losses import REGISTRY, spec
from rankwise.metrics import ndcg
from rankwise.models import GBDTRanker, LinearRanker, NeuralRanker, PairwiseReductionRanker


@pytest.fixture(scope="module")
def heavy():
    return make_heavy_tailed(40)


def _ndcg10(scores, y, qid):
    return float(ndcg(scores, y, qid=qid, k=10, gain="exp2", ties="average", empty=0.0))


def _fit(model, X, y, qid):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, y, qid=qid)
    return model, [w for w in caught if issubclass(w.category, UntrainedModelWarning)]


@pytest.mark.parametrize("loss", ["lambdarank", "lambdaloss"])
def test_default_solver_trains_the_weight_held_constant_losses_on_heavy_tailed_features(heavy, loss):
    X, y, qid, cut = heavy
    model, untrained = _fit(LinearRanker(loss=loss, max_iter=30, random_state=0), X[:cut], y[:cut], qid[:cut])
    assert model.solver_ == "adam" and not untrained and model.untrained_ is False
    assert np.abs(model.coef_).max() > 0.01
    held_out = _ndcg10(model.predict(X[cut:]), y[cut:], qid[cut:])
    constant = _ndcg10(np.zeros(len(X) - cut), y[cut:], qid[cut:])
    assert held_out > constant + 0.1, (held_out, constant)


def test_lbfgs_stuck_at_its_start_is_reported(heavy):
    X, y, qid, cut = heavy
    with pytest.warns(UserWarning) as caught:
        model = LinearRanker(loss="lambdarank", solver="lbfgs").fit(X[:cut], y[:cut], qid=qid[:cut])
    assert any("held constant in the step" in str(w.message) for w in caught)
    untrained = [w for w in caught if issubclass(w.category, UntrainedModelWarning)]
    # the failure of issue 28 itself: one iteration, all-zero weights ...
    assert model.n_iter_ <= 2 and np.all(model.coef_ == 0)
    # ... now said, with the fix
    assert model.untrained_ is True and len(untrained) == 1
    msg = str(untrained[0].message)
    assert "LinearRanker scores every document" in msg and "solver='auto' or 'adam'" in msg


def test_line_search_safe_losses_are_continuous_at_ties():
    """The declaration behind solver='auto': a loss declared line-search safe has the same value at
    all-tied scores as at scores 1e-8 apart (L-BFGS's zero start); lambdarank, declared unsafe, does not."""
    rng = np.random.default_rng(0)
    y = torch.from_numpy(rng.integers(0, 3, size=(4, 30)).astype(np.float64))
    tied = torch.zeros(4, 30, dtype=torch.float64)
    near = tied + 1e-8 * torch.from_numpy(rng.standard_normal((4, 30)))
    checked = 0
    for name, fn in REGISTRY.items():
        sp = spec(name)
        hyper = dict(sp.example_hyper)
        yy = y / 2 if sp.binary_labels else y
        if not sp.line_search_safe(hyper):
            continue
        a, b = float(fn(tied, yy, **hyper)), float(fn(near, yy, **hyper))
        assert abs(a - b) <= 1e-6 * max(1.0, abs(a)), (name, a, b)
        checked += 1
    assert checked >= 10
    assert not spec("lambdarank").line_search_safe({}) and not spec("lambdaloss").line_search_safe({})
    assert not spec("ranknet").line_search_safe({"pair_weights": "delta_ndcg"})
    assert spec("ranknet").line_search_safe({}) and spec("listnet").line_search_safe({})
    jump = float(REGISTRY["lambdarank"](near, y)) - float(REGISTRY["lambdarank"](tied, y))
    assert abs(jump) > 0.1


def test_auto_keeps_lbfgs_for_smooth_losses():
    X, y, qid = make_data()
    model, untrained = _fit(LinearRanker(loss="listnet"), X, y, qid)
    assert model.solver_ == "lbfgs" and model.n_iter_ > 1 and not untrained


def test_gbdt_without_a_split_is_reported():
    X, y, qid = make_data()
    model, untrained = _fit(GBDTRanker(n_estimators=3, min_child_samples=10_000, n_jobs=1, random_state=0), X, y, qid)
    assert model.untrained_ is True and len(untrained) == 1
    assert "min_child_samples" in str(untrained[0].message)
    model, untrained = _fit(GBDTRanker(n_estimators=3, n_jobs=1, random_state=0), X, y, qid)
    assert model.untrained_ is False and not untrained


def test_neural_that_never_left_its_random_start_is_reported():
    X, y, qid = make_data()
    model, untrained = _fit(NeuralRanker(max_iter=2, learning_rate=1e-300, random_state=0, n_jobs=1), X, y, qid)
    assert model.untrained_ is True and len(untrained) == 1
    assert "did not move from its start" in str(untrained[0].message)
    model, untrained = _fit(NeuralRanker(max_iter=2, random_state=0, n_jobs=1), X, y, qid)
    assert model.untrained_ is False and not untrained


def test_reduction_with_a_constant_classifier_is_reported():
    from sklearn.dummy import DummyClassifier

    X, y, qid = make_data(n_queries=15)
    model, untrained = _fit(PairwiseReductionRanker(DummyClassifier(), random_state=0), X, y, qid)
    assert model.untrained_ is True and len(untrained) == 1
    model, untrained = _fit(PairwiseReductionRanker(random_state=0), X, y, qid)
    assert model.untrained_ is False and not untrained
