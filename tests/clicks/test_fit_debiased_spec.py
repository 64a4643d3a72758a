"""fit_debiased reads whether a loss is affine in the labels from the loss's spec (LossSpec.labels_affine); the
numerical check runs only where the spec cannot tell (a callable utility)."""
from __future__ import annotations

import numpy as np
import pytest

import rankwise.theory.ips as theory_ips
from rankwise.clicks import ClickLog, fit_debiased
from rankwise.data import RankingDataset
from rankwise.errors import InputError
from rankwise.models import LinearRanker


def _log_and_features():
    log = ClickLog.from_arrays(["a", "a", "b"], [["x", "y"], ["y", "x"], ["z", "w"]], [[1, 0], [0, 1], [0, 1]])
    X = np.array([[1.0, 0.2], [0.1, 2e-3], [3.5e1, 1.0], [0.0, 1.5e-7]], dtype=np.float32)
    feats = RankingDataset.from_arrays(X, np.zeros(4), ["a", "a", "b", "b"], doc_ids=["x", "y", "z", "w"])
    return log, feats


def test_the_spec_decides_without_the_numerical_check(monkeypatch):
    calls = []
    monkeypatch.setattr(theory_ips, "labels_enter_linearly", lambda *a, **k: calls.append(a) or True)
    log, feats = _log_and_features()
    fit_debiased(LinearRanker(loss="op_pairwise", max_iter=3), log, feats, [1.0, 0.5])
    with pytest.raises(InputError, match="loss 'listnet' is not affine in the labels"):
        fit_debiased(LinearRanker(loss="listnet", max_iter=3), log, feats, [1.0, 0.5])
    with pytest.raises(InputError, match="loss 'op_pairwise' is not affine in the labels"):
        fit_debiased(LinearRanker(loss="op_pairwise", loss_params={"utility": "exp2"}, max_iter=3), log, feats,
                     [1.0, 0.5])
    assert calls == []


def test_a_callable_utility_is_checked_numerically():
    log, feats = _log_and_features()
    fit_debiased(LinearRanker(loss="pointwise_squared", loss_params={"utility": lambda y: 3 * y}, max_iter=3), log,
                 feats, [1.0, 0.5])
    with pytest.raises(InputError, match="not affine in the labels"):
        fit_debiased(LinearRanker(loss="pointwise_squared", loss_params={"utility": lambda y: y ** 2}, max_iter=3),
                     log, feats, [1.0, 0.5])


def test_unknown_loss_params_are_named():
    log, feats = _log_and_features()
    with pytest.raises(InputError, match=r"loss_params: unknown hyperparameter\(s\) \['utilty'\]"):
        fit_debiased(LinearRanker(loss="op_pairwise", loss_params={"utilty": "linear"}), log, feats, [1.0, 0.5])
