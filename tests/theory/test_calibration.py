"""The calibration checker finds the results of Calauzènes et al. (2013) by itself."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from rankwise.errors import InputError
from rankwise.theory import check_calibration, check_order_preserving
from rankwise.theory.inner import Distribution, label_space

from _ref import ref

# Order-preserving template losses of the registry (Sect. 3.1 and Table 2).
OP_LOSSES = [
    ("pointwise_squared", {}),
    ("pointwise_logistic", {}),
    ("pointwise_exponential", {}),
    ("pointwise_squared_hinge", {}),
    ("pointwise_smooth_hinge", {}),
    ("op_pairwise", {"phi": "logistic"}),
    ("op_pairwise", {"phi": "exponential"}),
    ("pairwise_squared", {}),
    ("bregman", {}),
]
SMALL = dict(n_grid=16, n_random=20, n_adversarial=6)


@pytest.mark.parametrize("loss,hyper", OP_LOSSES, ids=[f"{n}-{h.get('phi', '')}" for n, h in OP_LOSSES])
@pytest.mark.parametrize("metric", ["dcg", "ndcg", "p@2"])
def test_order_preserving_losses_are_calibrated_with_gppms(loss, hyper, metric):
    rep = check_calibration(loss, metric, 3, seed=1, **SMALL, **hyper)
    assert rep.calibrated, str(rep)
    assert rep.counterexample is None
    assert rep.n_distributions >= 40


@pytest.mark.parametrize("loss,hyper", OP_LOSSES, ids=[f"{n}-{h.get('phi', '')}" for n, h in OP_LOSSES])
@pytest.mark.parametrize("metric", ["err", "ap"])
def test_order_preserving_losses_are_not_calibrated_with_err_and_ap(loss, hyper, metric):
    """Theorem 3.3: found by the search itself (no hand-fed Δ)."""
    rep = check_calibration(loss, metric, 3, seed=0, **hyper)
    assert not rep.calibrated, str(rep)
    ce = rep.counterexample
    assert ce.regret > 1e-4 and ce.risk_gap > 1e-6
    assert ce.strategy in ("grid", "random", "adversarial")


def _verify_counterexample_independently(ce, measure, loss_ref, targets_of):
    """Re-derive the counterexample with the naive references: Nelder-Mead minimiser of the
    inner risk written as double loops, regret from the measures' definitions by brute force."""
    labels, probs = ce.distribution.labels, ce.distribution.probs
    targets = [targets_of(y) for y in labels]

    def L(s):
        return sum(p * loss_ref(s, v) for v, p in zip(targets, probs))

    best = None
    for x0 in (np.zeros(labels.shape[1]), ce.s_star):
        res = minimize(L, x0, method="Nelder-Mead", options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 4000})
        best = res if best is None or res.fun < best.fun else best
    rbar = ref.best_inner_performance(measure, labels, probs)
    regret = rbar - sum(p * ref.scoring_value(measure, y, best.x) for y, p in zip(labels, probs))
    return best, regret


def test_err_counterexample_verified_with_references():
    rep = check_calibration("pointwise_squared", "err", 3, seed=0)
    ce = rep.counterexample
    best, regret = _verify_counterexample_independently(ce, ref.err, ref.pointwise_squared, lambda y: y)
    assert regret == pytest.approx(ce.regret, rel=1e-6)
    # the squared loss minimiser is E[y] (the marginals) and ranks differently from the ERR optimum
    np.testing.assert_allclose(best.x, ce.distribution.probs @ ce.distribution.labels, atol=1e-6)


def test_ap_counterexample_verified_with_references():
    rep = check_calibration("op_pairwise", "ap", 3, seed=0)
    ce = rep.counterexample
    _, regret = _verify_counterexample_independently(ce, ref.average_precision, ref.op_pairwise_logistic, lambda y: y)
    assert regret == pytest.approx(ce.regret, rel=1e-4)


@pytest.mark.parametrize("metric", ["dcg", "ndcg"])
def test_usual_pairwise_hinge_is_not_order_preserving(metric):
    """Duchi et al. (2010) / Remark 2: Σ 1[v_i > v_j] φ(s_i − s_j) is not order-preserving."""
    rep = check_calibration("pairwise_hinge", metric, 3, seed=0, n_grid=60, n_random=60, n_adversarial=10,
                            method="dense")
    assert not rep.calibrated, str(rep)
    ce = rep.counterexample
    # independent check of the counterexample with the double-loop hinge and the DCG definition
    measure = (lambda y, p: ref.dcg(y, p)) if metric == "dcg" else (lambda y, p: ref.ndcg(y, p))
    best, regret = _verify_counterexample_independently(ce, measure, ref.duchi_hinge, lambda y: y)
    assert best.fun <= ce.distribution.probs @ [ref.duchi_hinge(ce.s_star, y) for y in ce.distribution.labels] + 1e-6
    assert ce.risk_gap > 1e-3


def test_reference_hinge_function_is_accepted_and_not_order_preserving():
    import torch

    def hinge(scores, labels, *, reduction="none", where=None, weights=None):
        d = scores[:, :, None] - scores[:, None, :]
        ind = (labels[:, :, None] > labels[:, None, :]).to(scores.dtype)
        return (ind * torch.relu(1 - d)).sum((-1, -2))

    rep = check_order_preserving(hinge, 3, gain="linear", convex=True, n_grid=60, n_random=60, n_adversarial=10)
    assert not rep.calibrated
    assert "NOT CALIBRATED" in str(rep) and "counterexample" in str(rep)


def test_report_is_readable_and_reproducible():
    a = check_calibration("pointwise_squared", "ap", 3, seed=3)
    b = check_calibration("pointwise_squared", "ap", 3, seed=3)
    np.testing.assert_array_equal(a.counterexample.distribution.probs, b.counterexample.distribution.probs)
    text = str(a)
    assert "pointwise_squared" in text and "'ap'" in text and "metric regret" in text
    ok = check_calibration("pointwise_squared", "dcg", 3, **SMALL)
    assert "CALIBRATED on every distribution tried" in str(ok)


def test_explicit_utility_is_applied_by_the_loss_to_raw_labels():
    """utility='exp2' given by the user: the loss receives raw labels and applies 2^y − 1 itself,
    which is the DCG utility, so the squared template is calibrated with DCG; with the linear
    utility it is not (E[y] and E[2^y − 1] can order items differently)."""
    ok = check_calibration("pointwise_squared", "dcg", 3, utility="exp2", random_state=0, **SMALL)
    assert ok.calibrated and ok.hyper["utility"] == "exp2"
    bad = check_calibration("pointwise_squared", "dcg", 3, utility="linear", seed=0)
    assert not bad.calibrated


def test_distribution_and_label_space():
    Y = label_space(3, 2)
    assert Y.shape == (8, 3)
    d = Distribution(Y, np.full(8, 1 / 8))
    assert d.n_items == 3
    with pytest.raises(InputError, match="sum to 1"):
        Distribution(Y, np.full(8, 0.2))
    with pytest.raises(InputError, match="shape"):
        Distribution(Y, np.full(7, 1 / 7))


def test_checker_rejects_bad_input():
    with pytest.raises(InputError, match="unknown loss 'nope'"):
        check_calibration("nope", "dcg")
    with pytest.raises(InputError, match="unknown metric"):
        check_calibration("pointwise_squared", "bleu")
    with pytest.raises(InputError, match="n_items must be an integer in"):
        check_calibration("pointwise_squared", "dcg", 9)
    with pytest.raises(InputError, match="binary labels"):
        check_calibration("pointwise_squared", "ap", 3, n_levels=3)
