"""rankwise.losses.structured: the structured hinges with the standard loss signature.

The maximisers themselves are checked against brute force in tests/models/test_structured.py;
here: the torch loss equals the per-list numpy hinge, its gradient is ``v* − ρ``, padding and
empty lists follow the loss contract, and measures resolve through the metrics registry.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from rankwise.errors import InputError
from rankwise.losses import get
from rankwise.losses.structured import resolve_measure, structured_hinge, structured_hinge_loss

MEASURES = ["ndcg@3", "ndcg", "precision@2", "recall@2", "f1", "accuracy", "kendall"]


def _batch(rng, B=6, L=7):
    s = rng.normal(size=(B, L))
    y = rng.integers(0, 3, size=(B, L)).astype(float)
    lengths = rng.integers(1, L + 1, size=B)
    where = np.arange(L)[None, :] < lengths[:, None]
    return s, y, where


@pytest.mark.parametrize("measure", MEASURES)
def test_value_and_gradient_equal_the_per_list_hinge(measure):
    rng = np.random.default_rng(0)
    s, y, where = _batch(rng)
    st = torch.tensor(s, requires_grad=True)
    out = structured_hinge_loss(st, torch.tensor(y), where=torch.tensor(where), measure=measure, reduction="none")
    out.sum().backward()
    out = out.detach()
    for i in range(len(s)):
        idx = np.flatnonzero(where[i])
        val, grad = structured_hinge(s[i, idx], y[i, idx], measure=measure)
        counts = len(idx) >= 2 if measure == "kendall" else bool(np.any(y[i, idx] > 0))
        assert float(out[i]) == pytest.approx(val if counts else 0.0, abs=1e-12)
        np.testing.assert_allclose(st.grad[i, idx].numpy(), grad if counts else 0.0, atol=1e-12)
        assert np.all(st.grad[i, ~where[i]].numpy() == 0.0)  # padding gets no gradient


@pytest.mark.parametrize("measure", ["ndcg@3", "precision@2", "kendall"])
def test_masking_equals_truncation_and_empty_lists_leave_the_mean(measure):
    rng = np.random.default_rng(1)
    s, y, where = _batch(rng)
    y[0] = 0.0  # no relevant item: exactly 0 and out of the mean (ndcg / precision)
    where[1, 1:] = False  # one item: out of the mean for kendall
    full = structured_hinge_loss(torch.tensor(s), torch.tensor(y), where=torch.tensor(where), measure=measure,
                                 reduction="none")
    for i in range(len(s)):
        n = int(where[i].sum())
        alone = structured_hinge_loss(torch.tensor(s[i, :n]), torch.tensor(y[i, :n]), measure=measure,
                                      reduction="sum")
        assert float(full[i]) == pytest.approx(float(alone), abs=1e-12)
    counts = [(int(where[i].sum()) >= 2) if measure == "kendall" else bool(np.any(y[i][where[i]] > 0))
              for i in range(len(s))]
    assert not all(counts)
    mean = structured_hinge_loss(torch.tensor(s), torch.tensor(y), where=torch.tensor(where), measure=measure)
    assert float(mean) == pytest.approx(float(full.sum()) / sum(counts), abs=1e-12)


def test_list_weights_scale_and_item_weights_are_refused():
    rng = np.random.default_rng(2)
    s, y, where = _batch(rng, B=3)
    w = torch.tensor([0.5, 2.0, 0.0])
    args = (torch.tensor(s), torch.tensor(y))
    plain = structured_hinge_loss(*args, where=torch.tensor(where), reduction="none")
    weighted = structured_hinge_loss(*args, where=torch.tensor(where), weights=w, reduction="none")
    np.testing.assert_allclose(weighted.numpy(), (plain * w.double()).numpy(), atol=1e-12)
    with pytest.raises(InputError, match="one per list"):
        structured_hinge_loss(*args, weights=torch.ones(s.shape))


def test_kendall_family_is_the_registered_kendall_hinge():
    rng = np.random.default_rng(3)
    s, y, _ = _batch(rng, L=6)
    st = torch.tensor(s)
    ours = structured_hinge_loss(st, torch.tensor(y), measure="kendall", reduction="none")
    ref = get("kendall_hinge")(st, torch.tensor(y), reduction="none")
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), atol=1e-12)


def test_measures_resolve_through_the_metrics_registry():
    assert resolve_measure("P@5") == resolve_measure("precision@5")  # the registry's alias
    assert resolve_measure("NDCG@10").k == 10 and resolve_measure("ndcg").k is None
    assert resolve_measure("tau").family == "kendall"
    assert resolve_measure("f1").family == "multivariate"
    with pytest.raises(InputError, match="unknown measure 'map' for a structured hinge"):
        resolve_measure("map")
    with pytest.raises(InputError, match="unknown metric 'nope'"):
        resolve_measure("nope")
    with pytest.raises(InputError, match="needs a cutoff"):
        resolve_measure("recall")
    with pytest.raises(InputError, match="cutoff in 'ndcg@0' must be an integer >= 1"):
        resolve_measure("ndcg@0")
