"""rankwise.train: optimisers against naive loops, batching, early stopping, history."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from reference.models_reference import averaged_ogd
from rankwise.errors import InputError
from rankwise.train import EarlyStopping, History, make_averaged_ogd, minimize_erm, query_batches, resolve_metric
from rankwise.train.batching import gather_padded


@pytest.mark.parametrize("radius", [None, 0.5])
def test_averaged_ogd_matches_naive_loop(radius):
    rng = np.random.default_rng(0)
    targets = rng.normal(size=(25, 3))
    # ℓ_t(w) = ||w - c_t||² / 2, gradient w - c_t
    grad_fns = [lambda w, c=c: w - c for c in targets]
    last_ref, avg_ref = averaged_ogd(grad_fns, np.zeros(3), lr=0.7, radius=radius)
    p = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    opt = make_averaged_ogd([p], lr=0.7, radius=radius)
    for c in targets:
        opt.zero_grad()
        (0.5 * ((p - torch.from_numpy(c)) ** 2).sum()).backward()
        opt.step()
    np.testing.assert_allclose(p.detach().numpy(), last_ref, rtol=1e-12, atol=1e-12)
    opt.swap_average()
    np.testing.assert_allclose(p.detach().numpy(), avg_ref, rtol=1e-12, atol=1e-12)
    opt.swap_average()
    np.testing.assert_allclose(p.detach().numpy(), last_ref, rtol=1e-12, atol=1e-12)


def test_minimize_erm_l1_matches_soft_threshold():
    # f(w) = ||w - c||² / 2 + l1 ||w||_1 has the closed form w* = sign(c) max(|c| - l1, 0)
    c = np.array([2.0, -0.3, 0.5, -1.7, 0.05])
    l1 = 0.4
    w, res = minimize_erm(lambda w: (0.5 * float((w - c) @ (w - c)), w - c), np.zeros(5), l1=l1, tol=1e-12)
    np.testing.assert_allclose(w, np.sign(c) * np.maximum(np.abs(c) - l1, 0), atol=1e-7)
    assert np.count_nonzero(w == 0) == 2  # exact zeros, not tiny values


@pytest.mark.parametrize("l1", [0.0, 0.3])
def test_minimize_erm_callback_gets_the_objective_of_its_last_evaluation(l1):
    c = np.array([1.5, -0.7, 0.2])
    evals, seen = [], []

    def fg(w):
        evals.append(w.copy())
        return 0.5 * float((w - c) @ (w - c)), w - c
    w, res = minimize_erm(fg, np.zeros(3), l1=l1, tol=1e-12, callback=lambda w, f: seen.append((w.copy(), f)))
    assert len(seen) == res.nit and len(evals) == res.nfev  # no evaluation beyond the optimiser's own
    for wk, f in seen:  # f is the objective (l1 term included) at the iterate handed over
        assert f == pytest.approx(0.5 * float((wk - c) @ (wk - c)) + l1 * np.abs(wk).sum(), rel=1e-12, abs=1e-15)


def test_minimize_erm_unpenalised_coordinate():
    c = np.array([1.0, 0.1])
    w, _ = minimize_erm(lambda w: (0.5 * float((w - c) @ (w - c)), w - c), np.zeros(2), l1=0.5,
                        l1_mask=np.array([True, False]), tol=1e-12)
    np.testing.assert_allclose(w, [0.5, 0.1], atol=1e-7)


def test_query_batches_cover_every_nonempty_query_once_and_bucket_by_length():
    sizes = np.array([3, 0, 7, 1, 7, 2, 9, 3, 5])
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    batches = query_batches(offsets, 3, rng=np.random.default_rng(0))
    flat = np.sort(np.concatenate(batches))
    np.testing.assert_array_equal(flat, np.flatnonzero(sizes > 0))
    assert all(len(b) <= 3 for b in batches)
    # lengths inside a batch are consecutive in the sorted order of lengths
    spans = sorted((sizes[b].min(), sizes[b].max()) for b in batches)
    for (lo1, hi1), (lo2, hi2) in zip(spans, spans[1:]):
        assert hi1 <= lo2


def test_gather_padded_rows_and_mask():
    X = np.arange(12, dtype=np.float32).reshape(6, 2)
    y = np.arange(6, dtype=float)
    offsets = np.array([0, 2, 5, 6])
    Xb, yb, _, where, rows = gather_padded(X, y, offsets, np.array([2, 1]))
    np.testing.assert_array_equal(where, [[True, False, False], [True, True, True]])
    np.testing.assert_array_equal(rows[where], [5, 2, 3, 4])
    np.testing.assert_array_equal(Xb[1, 2], X[4])
    assert yb[0, 1] == 0 and yb[1, 0] == 2


def test_early_stopping_patience_and_best():
    es = EarlyStopping(2)
    values = [0.1, 0.3, 0.2, 0.25]
    stops = [es.update(i, v) for i, v in enumerate(values)]
    assert stops == [False, False, False, True]
    assert es.best_step == 1 and es.best_value == 0.3
    assert not es.update(4, 0.5) and es.best_step == 4
    with pytest.raises(InputError, match="early_stopping_rounds must be a positive integer"):
        EarlyStopping(0)


def test_history_records_equal_length_columns():
    h = History()
    h.record(epoch=0, loss=1.0)
    h.record(epoch=1, loss=0.5, **{"ndcg@10": 0.7})
    assert h["ndcg@10"] == [None, 0.7] and len(h) == 2


def test_resolve_metric_uses_metric_registry():
    m = resolve_metric("ndcg@2")
    scores = np.array([3.0, 2.0, 1.0, 1.0, 2.0])
    labels = np.array([0.0, 1.0, 2.0, 1.0, 0.0])
    from reference.models_reference import ndcg_at_k_ties_average

    ref = np.mean([ndcg_at_k_ties_average(scores[:3], labels[:3], 2), ndcg_at_k_ties_average(scores[3:], labels[3:], 2)])
    assert m(scores, labels, np.array([0, 3, 5])) == pytest.approx(ref, abs=1e-12)
    with pytest.raises(InputError, match="unknown metric"):
        resolve_metric("ndgc@10")
