r"""Inverse propensity scoring under the position-based model: when is the IPS risk unbiased?

Setting (Joachims, Swaminathan & Schnabel, WSDM 2017, §3-4). A list of n documents with
relevance probabilities :math:`r_i = P(R_i = 1)` is shown at ranks :math:`k_i`; under the PBM
document i is examined with probability :math:`\theta_{k_i}` independently of R, and clicked iff
examined and relevant: :math:`c_i = E_i R_i`. The IPS labels are :math:`\tilde y_i = c_i / \theta_{k_i}`.

**Proposition** (unbiasedness). If every :math:`\theta_{k_i} > 0` and the loss is *affine in the
labels* — :math:`\ell(s, y) = a(s) + \sum_i y_i b_i(s)`, Joachims et al.'s "linearly decomposable"
losses — then :math:`E_c[\ell(s, c/\theta)] = \ell(s, r)` for every score vector s: the IPS risk
is an unbiased estimate of the full-information risk with labels r, for every model at once, so
their minimisers coincide. Proof: linearity of expectation and :math:`E[c_i/\theta_{k_i}] = r_i`.
If only the *gradient* in s is affine in y (squared losses: :math:`(y-s)^2` has a :math:`y^2`
term free of s), the expected IPS risk differs from ℓ(s, r) by a constant in s, which leaves the
minimiser and the gradient unbiased. A loss not affine in y (ListNet's softmax of the labels,
ListMLE's sort of the labels, LambdaLoss) has a biased IPS risk in general. A zero propensity
breaks the proposition (the documents never examined carry no information); clipping θ at τ > 0
trades this bias for bounded variance.

**What it means for calibration.** The expected IPS risk *is* the inner risk of the loss at the
labels :math:`r_i = P(R_i = 1)` (binary relevance, linear utility u(y) = y). So a loss that is
order-preserving (calibrated) for linear utilities stays calibrated after debiasing, for the
measures whose utility is the probability of relevance — e.g. DCG/NDCG with linear gain on binary
relevance, precision — provided the propensities are correct. It is *not* thereby calibrated for
the graded exp2 gains of the original judgments: the click data determine r, not the grade.
:func:`ips_risk_bias` and :func:`expected_ips_risk` check these statements numerically (the
expectation over all :math:`2^n` click vectors, exactly).

References
----------
T. Joachims, A. Swaminathan, T. Schnabel. "Unbiased learning-to-rank with biased feedback."
WSDM 2017, Proposition 1 and §4.
X. Wang, M. Bendersky, D. Metzler, M. Najork. "Learning to rank with selection bias in personal
search." SIGIR 2016.
C. Calauzènes, N. Usunier, P. Gallinari. "Calibration and regret bounds for order-preserving
surrogate losses in learning to rank." Machine Learning 93, 2013 (order-preserving losses).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from rankwise.errors import InputError

__all__ = ["labels_enter_linearly", "expected_ips_risk", "ips_risk_bias", "IPSBias", "simulate_ips_gradient"]


def _loss_fn(loss):
    from rankwise import losses

    if callable(loss):
        return loss
    return losses.get(loss)


def _value_and_grad(fn, s, y, hyper):
    import torch

    st = torch.tensor(s, dtype=torch.float64, requires_grad=True)
    yt = torch.tensor(y, dtype=torch.float64)
    v = fn(st, yt, reduction="sum", **hyper)
    (g,) = torch.autograd.grad(v, st)
    return float(v.detach()), g.numpy()


def labels_enter_linearly(loss, *, n_items: int = 5, n_trials: int = 3, seed: int = 0, rtol: float = 1e-7,
                          **hyper) -> bool:
    r"""Is the gradient of ``loss`` in the scores affine in the labels? (checked numerically)

    For random scores s and labels y₁, y₂ in [0, 1]ⁿ and λ ∈ (0, 1), compares
    :math:`\nabla_s \ell(s, \lambda y_1 + (1-\lambda) y_2)` with
    :math:`\lambda \nabla_s \ell(s, y_1) + (1-\lambda) \nabla_s \ell(s, y_2)`. True is the
    condition of the unbiasedness proposition of this module (for the gradient, hence the minimiser).
    """
    fn = _loss_fn(loss)
    rng = np.random.default_rng(seed)
    for _ in range(int(n_trials)):
        s = rng.normal(size=n_items)
        y1, y2 = rng.random(n_items), rng.random(n_items)
        lam = float(rng.uniform(0.2, 0.8))
        _, g1 = _value_and_grad(fn, s, y1, hyper)
        _, g2 = _value_and_grad(fn, s, y2, hyper)
        _, gm = _value_and_grad(fn, s, lam * y1 + (1 - lam) * y2, hyper)
        want = lam * g1 + (1 - lam) * g2
        if not np.allclose(gm, want, rtol=rtol, atol=rtol * (1 + np.abs(want).max())):
            return False
    return True


def _check(relevance, propensity):
    r = np.asarray(relevance, dtype=np.float64)
    t = np.asarray(propensity, dtype=np.float64)
    if r.ndim != 1 or t.shape != r.shape:
        raise InputError(f"relevance and propensity must be 1-d of the same length (one per shown document); "
                         f"got {r.shape} and {t.shape}")
    if np.any((r < 0) | (r > 1)):
        raise InputError("relevance must be probabilities in [0, 1]")
    if np.any(t <= 0) or np.any(t > 1):
        raise InputError("propensities must be in (0, 1]: a zero propensity leaves the IPS estimate undefined")
    if len(r) > 16:
        raise InputError(f"the exact expectation enumerates 2^n click vectors; n = {len(r)} > 16 is too many")
    return r, t


def expected_ips_risk(loss, scores, relevance, propensity, **hyper) -> tuple[float, np.ndarray]:
    r"""Exact :math:`E_c[\ell(s, c/\theta)]` and its gradient in s, over all 2ⁿ click vectors of the PBM
    (:math:`P(c_i = 1) = \theta_i r_i`, independent)."""
    fn = _loss_fn(loss)
    r, t = _check(relevance, propensity)
    s = np.asarray(scores, dtype=np.float64)
    q = t * r
    val, grad = 0.0, np.zeros_like(s)
    for c in itertools.product((0.0, 1.0), repeat=len(r)):
        c = np.array(c)
        p = float(np.prod(np.where(c == 1, q, 1 - q)))
        if p == 0:
            continue
        v, g = _value_and_grad(fn, s, c / t, hyper)
        val += p * v
        grad += p * g
    return val, grad


@dataclass
class IPSBias:
    """Expected IPS risk against the full-information risk at the same scores."""

    ips_value: float
    full_value: float
    ips_grad: np.ndarray
    full_grad: np.ndarray

    @property
    def value_bias(self) -> float:
        return self.ips_value - self.full_value

    @property
    def grad_bias(self) -> float:
        """max_i |E ∇ IPS risk − ∇ full risk|."""
        return float(np.max(np.abs(self.ips_grad - self.full_grad)))


def ips_risk_bias(loss, scores, relevance, propensity, **hyper) -> IPSBias:
    """Exact bias of the IPS risk (value and gradient) at ``scores``: zero gradient bias for every loss
    affine in the labels, generally non-zero otherwise."""
    fn = _loss_fn(loss)
    r, t = _check(relevance, propensity)
    v_ips, g_ips = expected_ips_risk(fn, scores, r, t, **hyper)
    v_full, g_full = _value_and_grad(fn, np.asarray(scores, dtype=np.float64), r, hyper)
    return IPSBias(v_ips, v_full, g_ips, g_full)


def simulate_ips_gradient(loss, scores, relevance, propensity, *, n_sessions: int = 20000, random_state=0,
                          clip: float | None = None, **hyper):
    """Monte-Carlo mean and standard error of the IPS gradient over simulated PBM sessions.

    Returns ``(mean_grad, std_err, full_grad)``; with ``clip`` the propensities are clipped at it
    (biased towards the top when it binds)."""
    fn = _loss_fn(loss)
    r, t = _check(relevance, propensity)
    s = np.asarray(scores, dtype=np.float64)
    rng = np.random.default_rng(random_state)
    tc = t if clip is None else np.maximum(t, clip)
    clicks = (rng.random((int(n_sessions), len(r))) < t * r).astype(np.float64)
    # the gradient is affine in the labels for the losses this is meant for, but we do not assume
    # it: one gradient per distinct click vector, weighted by its count
    uniq, counts = np.unique(clicks, axis=0, return_counts=True)
    grads = np.array([_value_and_grad(fn, s, c / tc, hyper)[1] for c in uniq])
    w = counts / counts.sum()
    mean = w @ grads
    var = w @ (grads - mean) ** 2
    _, g_full = _value_and_grad(fn, s, r, hyper)
    return mean, np.sqrt(var / n_sessions), g_full
