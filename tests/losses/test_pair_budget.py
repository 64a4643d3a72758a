"""The pair budget (issue 29 item 5): a query whose pair loss would visit more pairs than
``rankwise.losses.max_pairs`` / ``RANKWISE_MAX_PAIRS`` allow is refused before any work with an
InputError naming the loss, the query, its size, its pair count and what to do; a query at the
budget runs and gives the same result as without one."""
from __future__ import annotations

import math

import numpy as np
import pytest

from rankwise.errors import InputError
from rankwise.losses import DEFAULT_MAX_PAIRS, grad_hess, max_pairs, training_loss

torch = pytest.importorskip("torch")


def _different_label_pairs(y):
    """Brute force on small lists: pairs i < j with y_i != y_j."""
    y = np.asarray(y)
    return int(sum(int(y[i] != y[j]) for i in range(len(y)) for j in range(i + 1, len(y))))


def _query(n, seed=0, levels=3, spread=1.0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=n) * spread, rng.integers(0, levels, n).astype(np.float64)


def test_a_query_of_a_million_documents_is_refused_up_front():
    n = 1_000_000
    s, y = _query(n)
    counts = np.bincount(y.astype(np.int64))
    pairs = (n * n - int((counts.astype(object) ** 2).sum())) // 2  # ~3.3e11 pairs of different labels
    for loss, hyper in (("ranknet", {}), ("lambdarank", {"truncation_level": None}), ("lambdaloss", {})):
        with pytest.raises(InputError) as err:
            grad_hess(loss, s, y, np.array([0, n]), **hyper)
        msg = str(err.value)
        assert msg.startswith(f"{loss}: query 0 (0-based, of 1 in this call) has 1,000,000 documents"), msg
        assert f"visits {pairs:,} pairs (every pair of different labels (3 labels))" in msg
        assert f"pair budget of {DEFAULT_MAX_PAIRS:,}" in msg
        for advice in ("truncation_level=", "listnet", "rankwise.losses.max_pairs(", "RANKWISE_MAX_PAIRS"):
            assert advice in msg
    with pytest.raises(InputError, match=r"approx_ndcg: query 0 .* visits 499,999,500,000 pairs \(every pair\)"):
        grad_hess("approx_ndcg", s, y, np.array([0, n]))
    with pytest.raises(InputError, match="ranknet: query 0 .* 1,000,000 documents"):
        training_loss("ranknet", torch.from_numpy(s), torch.from_numpy(y))
    # the same query with a truncation level (n·T pairs) and a listwise loss give a result
    g, h = grad_hess("lambdarank", s, y, np.array([0, n]))  # truncation_level=50 by default
    assert np.all(np.isfinite(g)) and np.all(h > 0)


def test_pair_count_of_the_engine_is_exact_at_the_budget():
    # every pair of different labels, grouped by label (the logistic loop), counted by brute force
    s, y = _query(340, seed=1, levels=5)
    off = np.array([0, 40, 340])
    pairs = _different_label_pairs(y[40:])
    ref = grad_hess("ranknet", s, y, off)
    with max_pairs(pairs):
        got = grad_hess("ranknet", s, y, off)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])
    msg = rf"ranknet: query 1 \(0-based, of 2 in this call\) has 300 documents, so one call visits {pairs:,} pairs"
    with max_pairs(pairs - 1), pytest.raises(InputError, match=msg):
        grad_hess("ranknet", s, y, off)


@pytest.mark.parametrize("loss, hyper, count", [
    # truncation level T: the pairs with a document in the top T, T·n - T(T+1)/2
    ("lambdarank", {"truncation_level": 7}, 7 * 300 - 7 * 8 // 2),
    # every ordered pair weighs (op_pairwise): n(n-1)/2 unordered pairs visited
    ("op_pairwise", {}, 300 * 299 // 2),
    # a σ-scaled score spread beyond 500: the general loop goes over every pair
    ("ranknet", {"sigma": 1000.0}, 300 * 299 // 2),
])
def test_pair_count_per_kernel_at_the_budget(loss, hyper, count):
    s, y = _query(300, seed=2, levels=4)
    off = np.array([0, 300])
    ref = grad_hess(loss, s, y, off, **hyper)
    with max_pairs(count):
        got = grad_hess(loss, s, y, off, **hyper)
    np.testing.assert_array_equal(got[0], ref[0])
    with max_pairs(count - 1), pytest.raises(InputError, match=f"{loss}: query 0 .* visits {count:,} pairs"):
        grad_hess(loss, s, y, off, **hyper)


def test_dense_torch_pair_form_and_training_loss_follow_the_budget():
    from rankwise.losses import ranknet_loss

    s, y = _query(50, seed=3)
    st, yt = torch.from_numpy(s), torch.from_numpy(y)
    ref = ranknet_loss(st, yt)
    with max_pairs(50 * 49 // 2):
        assert float(ranknet_loss(st, yt)) == float(ref)
    with max_pairs(50 * 49 // 2 - 1), pytest.raises(InputError, match="ranknet: list 0 of the batch has 50 documents"):
        ranknet_loss(st, yt)
    pairs = _different_label_pairs(y)
    ref = training_loss("ranknet", st, yt)
    with max_pairs(pairs):
        assert float(training_loss("ranknet", st, yt)) == float(ref)
    with max_pairs(pairs - 1), pytest.raises(InputError, match=f"visits {pairs:,} pairs"):
        training_loss("ranknet", st, yt)


def test_sort_based_and_linear_losses_are_not_limited():
    # exact O(n log n) / O(n) forms visit no pairs: a budget of 1 does not stop them
    s, y = _query(2000, seed=4)
    off = np.array([0, 2000])
    with max_pairs(1):
        for loss in ("pairwise_hinge", "rankboost", "listnet", "listmle", "pairwise_squared"):
            g, _ = grad_hess(loss, s, y, off)
            assert np.all(np.isfinite(g))


def test_budget_settings(monkeypatch):
    s, y = _query(100, seed=5)
    off = np.array([0, 100])
    monkeypatch.setenv("RANKWISE_MAX_PAIRS", "10")
    with pytest.raises(InputError, match="pair budget of 10 per query"):
        grad_hess("ranknet", s, y, off)
    with max_pairs(None):  # the context manager wins over the environment
        grad_hess("ranknet", s, y, off)
    with max_pairs(math.inf):
        grad_hess("ranknet", s, y, off)
    monkeypatch.setenv("RANKWISE_MAX_PAIRS", "inf")
    grad_hess("ranknet", s, y, off)
    monkeypatch.setenv("RANKWISE_MAX_PAIRS", "lots")
    with pytest.raises(InputError, match="RANKWISE_MAX_PAIRS must be a positive whole number of pairs.*'lots'"):
        grad_hess("ranknet", s, y, off)
    for bad in (0, -5, 2.5, "x"):
        with pytest.raises(InputError, match="max_pairs must be a positive whole number"):
            with max_pairs(bad):
                pass
