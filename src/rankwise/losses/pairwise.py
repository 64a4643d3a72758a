"""Pairwise losses: a term per ordered pair of real items, summed over the pairs of a list.

Every dense pairwise loss here has the *pair form*

.. math:: \\ell(\\mathbf y, \\mathbf s) = \\sum_{i, j} W_{ij}\\, \\varphi_{ij}(s_i - s_j)

with a pair weight matrix ``W`` (zero outside the pairs the loss uses; never differentiated) and
a scalar function of the score difference; each loss's ``pair_form`` (declared in its
:class:`~rankwise.losses.LossSpec`) returns both, which is how the GBDT adapter gets an exact
diagonal Hessian. Item weights multiply pair weights as
``w_i w_j``; per-list weights multiply the list's sum.

Pair weights (``pair_weights``): ``"none"`` (1), ``"delta_label"`` (|y_i - y_j|), or
``"delta_ndcg"`` (LambdaRank: |G_i - G_j| |1/log2(1+r_i) - 1/log2(1+r_j)| / maxDCG with
G = 2^y - 1 and r the current ranks by score, detached).

Sort-based O(n log n) forms (``method="sort"``, chosen by ``"auto"`` where exact): the RankSVM
hinge and the Kendall hinge (Fenwick sweep, ``_sorted_hinge``), RankBoost (Fenwick sweeps with
log-domain exponential sums, ``_sorted_exp``), the order-preserving template with the exponential
or the squared hinge (one sort, cumulative sums), and the all-pairs squared loss (closed form,
O(n)). The logistic (RankNet, the logistic template, LambdaLoss) has no exact sort-based form and
stays O(n^2). Each spec's ``fast_terms`` gives the GBDT adapter the value, gradient and exact
Hessian diagonal of the sort-based forms.
"""
from __future__ import annotations

import math

import numpy as np

from rankwise.errors import InputError
from rankwise.losses import _engine
from rankwise.losses._deferred import deferred
from rankwise.losses._sorted_exp import sorted_exp_function, sorted_exp_terms
from rankwise.losses._sorted_hinge import sorted_hinge_function
from rankwise.losses._spec import CT, LossSpec, RegretRule, affine_if_linear_utility, never, u_inf
from rankwise.losses._utils import (
    EXP_CLIP,
    check_choice,
    check_positive,
    gains,
    check_pair_memory,
    ideal_dcg,
    log2p1,
    prepare,
    ranks_from_scores,
    reduce,
    safe_exp,
    scaled_gains,
    utility,
)

torch = deferred("torch", globals())
F = deferred("torch.nn.functional", globals(), "F")

PAIR_WEIGHTS = ("none", "delta_label", "delta_ndcg")
GAINS = ("exp2", "linear")
METHODS = ("auto", "dense", "sort")
OP_PHIS = ("logistic", "exponential", "squared_hinge")
_PW_SORT = "'none' and 'delta_label'"


def _ordered_pairs(y, mask):
    """[B, L, L] bool: both real and y_i > y_j."""
    both = mask.unsqueeze(-1) & mask.unsqueeze(-2)
    return both & (y.unsqueeze(-1) > y.unsqueeze(-2))


def _item_product(b):
    if b.item_w is None:
        return None
    return b.item_w.unsqueeze(-1) * b.item_w.unsqueeze(-2)


def delta_ndcg(s, y, mask, loss="delta_ndcg", gain="exp2", k=None):
    """|ΔNDCG| of swapping i and j in the current ranking (LambdaRank weights), detached; with
    ``k`` the normaliser is max DCG@k (LightGBM's, for a truncation level k)."""
    g = scaled_gains(gains(y, check_choice(gain, "gain", GAINS, loss), loss=loss), mask)
    r = ranks_from_scores(s, mask)
    inv_d = 1.0 / log2p1(r)
    idcg = ideal_dcg(g, mask, k)
    w = (g.unsqueeze(-1) - g.unsqueeze(-2)).abs() * (inv_d.unsqueeze(-1) - inv_d.unsqueeze(-2)).abs()
    safe = torch.where(idcg > 0, idcg, torch.ones_like(idcg))
    return torch.where((idcg > 0)[:, None, None], w / safe[:, None, None], torch.zeros_like(w))


def _weights(b, kind, name, gain="exp2", k=None):
    kind = check_choice(kind, "pair_weights", PAIR_WEIGHTS, name)
    check_pair_memory(b, name)
    P = _ordered_pairs(b.labels, b.mask)
    W = P.to(b.scores.dtype)
    if kind == "delta_label":
        W = W * (b.labels.unsqueeze(-1) - b.labels.unsqueeze(-2))
    elif kind == "delta_ndcg":
        W = W * delta_ndcg(b.scores, b.labels, b.mask, name, gain, k)
    ip = _item_product(b)
    if ip is not None:
        W = W * ip
    return W.detach(), P.flatten(1).any(-1)


def check_truncation(level, name):
    """``truncation_level``: None (every pair) or a positive int."""
    if level is None:
        return None
    if isinstance(level, bool) or not isinstance(level, (int, np.integer)) or level < 1:
        raise InputError(f"{name}: truncation_level must be None or a positive integer; got {level!r}")
    return int(level)


def check_flag(value, param, name):
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(f"{name}: {param} must be True or False; got {value!r}")
    return bool(value)


def lambdarank_options(b, W, phi, truncation_level, norm):
    """LightGBM's lambdarank options on a pair-weight matrix (detached).

    ``truncation_level`` T keeps the pairs with at least one item among the top T of the current
    ranking (``lambdarank_truncation_level``). ``norm`` (``lambdarank_norm``) divides each pair
    weight by 0.01 + |s_i - s_j| (unless all scores of the list are equal) and then scales the
    list by log2(1 + S)/S, S = Σ 2|W_ij φ'(s_i - s_j)| the list's total lambda: the factors are
    constants of the step, as the ΔNDCG weights."""
    if truncation_level is not None:
        r = ranks_from_scores(b.scores, b.mask)
        W = torch.where(torch.minimum(r.unsqueeze(-1), r.unsqueeze(-2)) <= truncation_level, W, torch.zeros_like(W))
    if norm:
        sd = b.scores.detach()
        D = sd.unsqueeze(-1) - sd.unsqueeze(-2)
        big = torch.finfo(sd.dtype).max
        hi = torch.where(b.mask, sd, torch.full_like(sd, -big)).max(-1).values
        lo = torch.where(b.mask, sd, torch.full_like(sd, big)).min(-1).values
        W = torch.where((hi > lo)[:, None, None], W / (0.01 + D.abs()), W)
        lam = 2 * (W * phi.d1(D)).abs().sum((-1, -2))
        safe = torch.where(lam > 0, lam, torch.ones_like(lam))
        W = W * torch.where(lam > 0, torch.log2(1 + lam) / safe, torch.ones_like(lam))[:, None, None]
    return W.detach()


def _dense(b, W, phi):
    D = b.scores.unsqueeze(-1) - b.scores.unsqueeze(-2)
    terms = torch.where(W != 0, W * phi(D), torch.zeros_like(D))
    return terms.sum((-1, -2))


# ---------------------------------------------------------------------------------------------
# pair forms: (W, phi, valid) for every dense pairwise loss


class PairPhi:
    """φ(d) with its first and second derivatives in closed form (used for the GBDT Hessian)."""

    def __init__(self, f, d1, d2):
        self.f, self.d1, self.d2 = f, d1, d2

    def __call__(self, d):
        return self.f(d)


def _softplus_grad(x):
    # the derivative of F.softplus as autograd computes it (it is linear beyond 20)
    return torch.where(x > 20, torch.ones_like(x), torch.sigmoid(x))


def _phi_logistic(sigma, scale=1.0):
    return PairPhi(lambda d: F.softplus(-sigma * d) * scale,
                   lambda d: -sigma * scale * _softplus_grad(-sigma * d),
                   lambda d: sigma * sigma * scale * torch.sigmoid(sigma * d) * torch.sigmoid(-sigma * d))


_phi_hinge = PairPhi(lambda d: torch.relu(1 - d), lambda d: -(d < 1).to(d.dtype),
                     lambda d: torch.zeros_like(d))
_phi_exp = PairPhi(lambda d: safe_exp(-d),
                   lambda d: -torch.exp(torch.clamp(-d, max=EXP_CLIP)),
                   lambda d: torch.where(-d < EXP_CLIP, torch.exp(torch.clamp(-d, max=EXP_CLIP)), torch.zeros_like(d)))
_phi_sq_hinge = PairPhi(lambda d: torch.relu(1 - d) ** 2, lambda d: -2 * torch.relu(1 - d),
                        lambda d: 2 * (d < 1).to(d.dtype))


# one pair form per loss: (W, phi, valid) such that the loss of each list is
# ``sum_ij W_ij phi(s_i - s_j)`` plus a constant; ``valid`` marks lists that have at least one pair


def _hinge_pairs(b, *, pair_weights="none", **_):
    W, valid = _weights(b, pair_weights, "pairwise_hinge")
    return W, _phi_hinge, valid


def _ranknet_pairs(b, *, sigma=1.0, pair_weights="none", truncation_level=None, norm=False, gain="exp2", name="ranknet",
                   **_):
    sigma = check_positive(sigma, "sigma", name)
    T = check_truncation(truncation_level, name)
    W, valid = _weights(b, pair_weights, name, gain, T)
    phi = _phi_logistic(sigma)
    return lambdarank_options(b, W, phi, T, check_flag(norm, "norm", name)), phi, valid


def _lambdarank_pairs(b, *, sigma=1.0, truncation_level=50, norm=True, gain="exp2", **_):
    return _ranknet_pairs(b, sigma=sigma, pair_weights="delta_ndcg", truncation_level=truncation_level, norm=norm,
                          gain=gain, name="lambdarank")


def _rankboost_pairs(b, *, pair_weights="none", **_):
    W, valid = _weights(b, pair_weights, "rankboost")
    return W, _phi_exp, valid


def _kendall_pairs(b, **_):
    W, valid = _weights(b, "none", "kendall_hinge")
    r = b.mask.sum(-1).to(b.scores.dtype)
    norm = torch.where(r > 1, 2.0 / (r * (r - 1)).clamp(min=1), torch.zeros_like(r))
    return W * norm[:, None, None], _phi_hinge, r > 1


def _op_pairs(b, *, utility="linear", phi="logistic", **_):
    name = "op_pairwise"
    check_pair_memory(b, name)
    v = _op_utility(b, utility, name)
    phi_name = check_choice(phi, "phi", OP_PHIS, name)
    f = {"logistic": _phi_logistic(1.0), "exponential": _phi_exp, "squared_hinge": _phi_sq_hinge}[phi_name]
    both = b.mask.unsqueeze(-1) & b.mask.unsqueeze(-2)
    eye = torch.eye(b.scores.shape[-1], dtype=torch.bool, device=b.scores.device)
    both = both & ~eye
    W = both.to(b.scores.dtype) * v.unsqueeze(-1)
    ip = _item_product(b)
    if ip is not None:
        W = W * ip
    return W.detach(), f, both.flatten(1).any(-1)


def _squared_pairs(b, *, utility="linear", **_):
    check_pair_memory(b, "pairwise_squared")
    v = _util(b, utility, "pairwise_squared")
    both = b.mask.unsqueeze(-1) & b.mask.unsqueeze(-2)
    upper = torch.triu(torch.ones(both.shape[-2:], dtype=torch.bool, device=both.device), 1)
    both = both & upper
    W = both.to(b.scores.dtype)
    ip = _item_product(b)
    if ip is not None:
        W = W * ip
    dv = (v.unsqueeze(-1) - v.unsqueeze(-2)).detach()
    return W.detach(), PairPhi(lambda d: (dv - d) ** 2, lambda d: -2 * (dv - d),
                               lambda d: torch.full_like(d, 2.0)), both.flatten(1).any(-1)


# ---------------------------------------------------------------------------------------------
# sort-based kernels


def _sorted_hinge(b, c0, c1):
    w = b.item_w if b.item_w is not None else b.mask.to(b.scores.dtype)
    val, tie = sorted_hinge_function().apply(b.scores, b.labels, w, b.mask, c0, c1)
    return val, tie


def _has_ordered_pair(b):
    big = torch.finfo(b.labels.dtype).max
    hi = torch.where(b.mask, b.labels, torch.full_like(b.labels, -big)).max(-1).values
    lo = torch.where(b.mask, b.labels, torch.full_like(b.labels, big)).min(-1).values
    return b.mask.any(-1) & (hi > lo)


def _rankboost_coefs(pw):
    """(c0, c1) of the pair coefficient c0 + c1 (y_i - y_j) for pair_weights "none" / "delta_label"."""
    return (1.0, 0.0) if pw == "none" else (0.0, 1.0)


def _list_low(x, mask, margin=1e4):
    """Per-list stand-in for log 0 in a log-cumulative sum: far below every real entry (finite, so
    gradients through ``logcumsumexp`` stay finite)."""
    lo = torch.where(mask, x.detach(), torch.full_like(x, math.inf)).min(-1, keepdim=True).values
    return torch.where(torch.isfinite(lo), lo, torch.zeros_like(lo)) - margin


def _op_sorted(b, v, phi_name, *, hessian=False):
    """sum_{i != j} a_i c_j phi(s_i - s_j) with a = v w, c = w, for phi exponential (continued
    linearly beyond EXP_CLIP, as ``safe_exp``) or squared hinge, from one sort of the scores.

    Exponential: pairs with s_j - s_i < T form a prefix of the score order, where the sum factorises
    into a log-cumulative-sum-exp; beyond it phi is linear (suffix sums). Squared hinge: the active
    pairs (s_j > s_i - 1) form a suffix, and (1 + s_j - s_i)^2 expands into suffix sums of c, c x,
    c x^2 with x = s - mean(s) (centred, and in float64, to limit cancellation for large scores).
    O(n log n). Returns the per-list value (differentiable) and, with ``hessian=True``, the exact
    Hessian diagonal sum_j W_ij phi''(s_i - s_j) + W_ji phi''(s_j - s_i)."""
    dt = b.scores.dtype
    f64 = torch.float64
    s = b.scores.to(f64)
    mask = b.mask
    c = (b.item_w if b.item_w is not None else mask.to(dt)).to(f64)
    a = v.detach().to(f64) * c
    key = torch.where(mask, s.detach(), torch.full_like(s, math.inf))
    key_s, order = torch.sort(key, dim=-1)
    key_s = key_s.contiguous()
    ss = torch.gather(s, -1, order)
    as_ = torch.gather(a, -1, order)
    cs = torch.gather(c, -1, order)
    ms = torch.gather(mask, -1, order)
    zero = torch.zeros_like(ss)
    zcol = torch.zeros_like(ss[..., :1])

    def suffix(x):  # [B, L + 1]: sum of x over sorted positions >= k (no subtraction)
        return torch.cat([x.flip(-1).cumsum(-1).flip(-1), zcol], -1)

    def prefix(x):  # [B, L + 1]: sum of x over sorted positions < k
        return torch.cat([zcol, x.cumsum(-1)], -1)

    hs = None
    if phi_name == "exponential":
        T = EXP_CLIP
        p = torch.searchsorted(key_s, (key_s + T).contiguous(), side="left")  # window: positions < p
        low = _list_low(ss, ms)
        lc = torch.logcumsumexp(torch.where(ms & (cs > 0), torch.log(torch.where(cs > 0, cs, 1.0)) + ss, low), -1)
        lci = torch.gather(lc, -1, (p - 1).clamp(min=0))
        # sum_{j in window, j != i} c_j e^{s_j - s_i}: the window always holds i itself (c_i e^0)
        e_in = torch.exp(torch.where(ms, lci - ss, zero)) - cs
        lin = torch.gather(suffix(cs), -1, p) * (1 - T - ss) + torch.gather(suffix(cs * ss), -1, p)
        per = as_ * (e_in + math.exp(T) * lin)
        if hessian:
            # a_i sum_{window} c_j e^{s_j - s_i} + c_i sum_{j: s_j > s_i - T, j != i} a_j e^{s_i - s_j}
            qq = torch.searchsorted(key_s, (key_s - T).contiguous(), side="right").clamp(max=ss.shape[-1] - 1)
            la = torch.where(ms & (as_ > 0), torch.log(torch.where(as_ > 0, as_, 1.0)) - ss, _list_low(-ss, ms))
            rl = torch.logcumsumexp(la.flip(-1), -1).flip(-1)
            e_out = torch.exp(torch.where(ms, torch.gather(rl, -1, qq) + ss, zero)) - as_
            hs = (as_ * e_in + cs * e_out).detach()
    else:  # squared hinge
        n_valid = ms.sum(-1, keepdim=True).clamp(min=1)
        centre = torch.where(ms, ss.detach(), zero).sum(-1, keepdim=True) / n_valid
        x = torch.where(ms, ss - centre, zero)
        q = torch.searchsorted(key_s, (key_s - 1).contiguous(), side="right")  # active: positions >= q
        r0 = torch.gather(suffix(cs), -1, q)
        r1 = torch.gather(suffix(cs * x), -1, q)
        r2 = torch.gather(suffix(cs * x * x), -1, q)
        per = as_ * (r0 * (1 - x) ** 2 + 2 * (1 - x) * r1 + r2 - cs)
        if hessian:
            pp = torch.searchsorted(key_s, (key_s + 1).contiguous(), side="left")  # s_j < s_i + 1
            hs = (2 * as_ * (r0 - cs) + 2 * cs * (torch.gather(prefix(as_), -1, pp) - as_)).detach()
    val = torch.where(ms, per, zero).sum(-1).to(dt)
    if hs is None:
        return val, None
    hs = torch.where(ms, hs, zero)
    return val, torch.zeros_like(hs).scatter(-1, order, hs).to(dt)


def _rankboost_fast(b, *, pair_weights="none", method="auto", **_):
    pw = check_choice(pair_weights, "pair_weights", PAIR_WEIGHTS, "rankboost")
    if method == "dense" or pw == "delta_ndcg":
        return None
    w = b.item_w if b.item_w is not None else b.mask.to(b.scores.dtype)
    c0, c1 = _rankboost_coefs(pw)
    return sorted_exp_terms(b.scores.detach(), b.labels, w, b.mask, c0, c1, EXP_CLIP)


def _squared_fast(b, *, utility="linear", method="auto", **_):
    if method == "dense":
        return None
    val = _pairwise_squared_closed(b, utility, "pairwise_squared")
    # all pairs i < j weighted w_i w_j, phi'' = 2: h_i = 2 w_i (sum_j w_j - w_i)
    w = b.item_w if b.item_w is not None else b.mask.to(b.scores.dtype)
    return val, None, 2 * w * (w.sum(-1, keepdim=True) - w)


def _op_fast(b, *, utility="linear", phi="logistic", method="auto", **_):
    phi = check_choice(phi, "phi", OP_PHIS, "op_pairwise")
    if method == "dense" or phi == "logistic":
        return None
    val, h = _op_sorted(b, _op_utility(b, utility, "op_pairwise"), phi, hessian=True)
    return val, None, h


# ---------------------------------------------------------------------------------------------
# the losses


def _method(method, name):
    return check_choice(method, "method", METHODS, name)


def _use_sort(method, name, param, value, dense_only, supported, needs):
    """Whether ``method`` ("auto", "sort", "dense") takes the sort-based form, given that
    ``param=value`` has one unless ``value == dense_only``; ``method="sort"`` with that value is
    refused, naming what it supports."""
    method = _method(method, name)
    if method == "sort" and value == dense_only:
        raise InputError(f"{name}: method='sort' supports {param} {supported}; "
                         f"{needs} needs method='dense' (or 'auto')")
    return method != "dense" and value != dense_only


def pairwise_hinge_loss(scores, labels, *, where=None, weights=None, reduction="mean",
                        pair_weights="none", method="auto"):
    r"""RankSVM pairwise hinge.

    .. math:: \ell = \sum_{i,j:\, y_i > y_j} \omega_{ij} \max(0, 1 - (s_i - s_j))

    ``method="auto"`` uses the O(n log n) Fenwick sweep for ``pair_weights`` "none" and
    "delta_label" and the dense O(n^2) form for "delta_ndcg". Convex, not order-preserving
    (Calauzènes et al. 2013, Remark 2); ℓ∞ Lipschitz constant 2⌊m²/4⌋ grows with list length.

    References
    ----------
    T. Joachims. "Optimizing search engines using clickthrough data." KDD 2002.
    S. Chaudhuri, A. Tewari. "Generalization error bounds for learning to rank: does the
    length of document lists matter?" ICML 2015, §3.3.
    """
    name = "pairwise_hinge"
    b = prepare(scores, labels, where, weights, loss=name)
    pw = check_choice(pair_weights, "pair_weights", PAIR_WEIGHTS, name)
    if _use_sort(method, name, "pair_weights", pw, "delta_ndcg", _PW_SORT, "delta_ndcg"):
        val, _ = _sorted_hinge(b, *_rankboost_coefs(pw))
        return reduce(val, _has_ordered_pair(b), b, reduction, loss=name)
    W, phi, valid = _hinge_pairs(b, pair_weights=pw)
    return reduce(_dense(b, W, phi), valid, b, reduction, loss=name)


def kendall_hinge_loss(scores, labels, *, where=None, weights=None, reduction="mean", method="auto"):
    r"""Hinge surrogate of the Kendall-tau loss, averaged over the r(r-1)/2 pairs.

    .. math:: \ell = \frac{2}{r(r-1)} \sum_{i<j} \max\bigl(0, 1 - \operatorname{sign}(y_i - y_j)
       (s_i - s_j)\bigr)

    Pairs with equal labels contribute the constant 1 (sign 0). Item weights multiply pair
    terms by ``w_i w_j``; r counts real items. Convex; ℓ∞ Lipschitz ≤ 4⌊r²/4⌋ / (r(r-1)) ≤ 1 + 1/(r-1),
    i.e. bounded in the list length, unlike the summed RankSVM hinge.

    References
    ----------
    S. Shalev-Shwartz, S. Ben-David. *Understanding Machine Learning*. Cambridge University
    Press, 2014. §17.4, "A Hinge Loss for the Kendall Tau Loss Function".
    """
    name = "kendall_hinge"
    b = prepare(scores, labels, where, weights, loss=name)
    method = _method(method, name)
    r = b.mask.sum(-1).to(b.scores.dtype)
    norm = torch.where(r > 1, 2.0 / (r * (r - 1)).clamp(min=1), torch.zeros_like(r))
    if method != "dense":
        val, tie = _sorted_hinge(b, 1.0, 0.0)
        return reduce(norm * (val + tie), r > 1, b, reduction, loss=name)
    W, phi, valid = _kendall_pairs(b)
    # tied pairs: constant 1 each (weighted by w_i w_j)
    both = b.mask.unsqueeze(-1) & b.mask.unsqueeze(-2)
    tied = both & (b.labels.unsqueeze(-1) == b.labels.unsqueeze(-2))
    tied = torch.triu(tied, 1).to(b.scores.dtype)
    ip = _item_product(b)
    if ip is not None:
        tied = tied * ip
    return reduce(_dense(b, W, phi) + norm * tied.sum((-1, -2)), valid, b, reduction, loss=name)


def ranknet_loss(scores, labels, *, where=None, weights=None, reduction="mean", sigma=1.0,
                 pair_weights="none", truncation_level=None, norm=False, gain="exp2"):
    r"""RankNet pairwise logistic loss.

    .. math:: \ell = \sum_{y_i > y_j} \omega_{ij} \log\bigl(1 + e^{-\sigma (s_i - s_j)}\bigr)

    With ``pair_weights="delta_ndcg"`` this is the LambdaRank objective (LambdaMART with trees):
    ω_ij = |G_i - G_j| |1/log2(1+r_i) - 1/log2(1+r_j)| / maxDCG, G the ``gain`` ("exp2":
    2^y - 1, or "linear") and r the current ranks. LightGBM's lambdarank options, for any pair
    weights: ``truncation_level`` T keeps the pairs with an item among the current top T (and
    normalises ΔNDCG by max DCG@T), ``norm`` divides ω_ij by 0.01 + |s_i - s_j| and rescales the
    list's lambdas by log2(1 + S)/S. Every such factor is held constant in the step, as the ΔNDCG
    weights are. O(n^2) per list in this torch form; the compiled engine
    (:func:`rankwise.losses.grad_hess`, :func:`rankwise.losses.training_loss`) costs O(n T).
    Convex for fixed weights.

    References
    ----------
    C. Burges et al. "Learning to rank using gradient descent." ICML 2005.
    C. Burges. "From RankNet to LambdaRank to LambdaMART: an overview." MSR-TR-2010-82.
    G. Ke et al. "LightGBM: a highly efficient gradient boosting decision tree." NeurIPS 2017
    (``lambdarank_truncation_level``, ``lambdarank_norm``).
    """
    name = "ranknet"
    b = prepare(scores, labels, where, weights, loss=name)
    W, phi, valid = _ranknet_pairs(b, sigma=sigma, pair_weights=pair_weights, truncation_level=truncation_level,
                                   norm=norm, gain=gain)
    return reduce(_dense(b, W, phi), valid, b, reduction, loss=name)


def lambdarank_loss(scores, labels, *, where=None, weights=None, reduction="mean", sigma=1.0, truncation_level=50,
                    norm=True, gain="exp2"):
    r"""LambdaMART's objective as LightGBM computes it (``objective="lambdarank"``): RankNet with
    ΔNDCG pair weights, truncated and normalised.

    .. math:: \ell = F \sum_{y_i > y_j,\ \min(r_i, r_j) \le T}
       \frac{|G_i - G_j|\,|1/\log_2(1+r_i) - 1/\log_2(1+r_j)|}{\mathrm{maxDCG@}T\;(0.01 + |s_i - s_j|)}
       \log\bigl(1 + e^{-\sigma (s_i - s_j)}\bigr), \quad F = \frac{\log_2(1 + S)}{S}

    with r the current ranks, G the ``gain`` (2^y - 1), T = ``truncation_level``, S the list's
    total |lambda| (Σ 2|∂ℓ_ij/∂s_i| before F) and every weight held constant in the step (the
    division by 0.01 + |s_i - s_j| is skipped when all scores of the list are equal; ``norm=False``
    drops it and F). Equals :func:`ranknet_loss` with ``pair_weights="delta_ndcg"`` and the same
    options; registered on its own so that the LambdaMART defaults are one name: norm on, σ = 1 and
    T = 50, chosen on validation queries (docs/losses.md, "Defaults chosen by measurement";
    LightGBM's own default is T = 30, ``truncation_level=30`` reproduces it). Not convex (the
    weights depend on the ranking).

    References
    ----------
    C. Burges. "From RankNet to LambdaRank to LambdaMART: an overview." MSR-TR-2010-82, 2010.
    G. Ke et al. "LightGBM: a highly efficient gradient boosting decision tree." NeurIPS 2017
    (``lambdarank_truncation_level``, ``lambdarank_norm``).
    """
    name = "lambdarank"
    b = prepare(scores, labels, where, weights, loss=name)
    W, phi, valid = _lambdarank_pairs(b, sigma=sigma, truncation_level=truncation_level, norm=norm, gain=gain)
    return reduce(_dense(b, W, phi), valid, b, reduction, loss=name)


def rankboost_loss(scores, labels, *, where=None, weights=None, reduction="mean",
                   pair_weights="none", method="auto"):
    r"""RankBoost pairwise exponential loss.

    .. math:: \ell = \sum_{y_i > y_j} \omega_{ij}\, e^{-(s_i - s_j)}

    The exponential is continued linearly beyond an argument of 50 (value and slope match), so
    the loss stays finite for scores up to ±1e4. ``method="sort"`` (chosen by ``"auto"`` for
    pair weights "none" and "delta_label") computes value and gradient in O(n log n) by score
    sweeps with Fenwick trees whose exponential sums are kept in the log domain, exact for any
    score range (see ``rankwise.losses._sorted_exp``); "delta_ndcg" weights depend on the
    current ranks and use the dense O(n^2) form.

    References
    ----------
    Y. Freund, R. Iyer, R. Schapire, Y. Singer. "An efficient boosting algorithm for combining
    preferences." JMLR 4, 2003.
    """
    name = "rankboost"
    b = prepare(scores, labels, where, weights, loss=name)
    pw = check_choice(pair_weights, "pair_weights", PAIR_WEIGHTS, name)
    if _use_sort(method, name, "pair_weights", pw, "delta_ndcg", _PW_SORT, "delta_ndcg"):
        w = b.item_w if b.item_w is not None else b.mask.to(b.scores.dtype)
        c0, c1 = _rankboost_coefs(pw)
        val = sorted_exp_function().apply(b.scores, b.labels, w, b.mask, c0, c1, EXP_CLIP)
        return reduce(val, _has_ordered_pair(b), b, reduction, loss=name)
    W, phi, valid = _rankboost_pairs(b, pair_weights=pw)
    return reduce(_dense(b, W, phi), valid, b, reduction, loss=name)


def _pairwise_squared_closed(b, u, name):
    v = _util(b, u, name)
    a = torch.where(b.mask, v - b.scores, torch.zeros_like(v))
    w = b.item_w if b.item_w is not None else b.mask.to(a.dtype)
    sw = w.sum(-1)
    abar = (w * a).sum(-1) / sw.clamp(min=torch.finfo(a.dtype).tiny)
    return sw * (w * (a - abar.unsqueeze(-1)) ** 2).sum(-1)


def pairwise_squared_loss(scores, labels, *, where=None, weights=None, reduction="mean",
                          utility="linear", method="auto"):
    r"""Pairwise squared template over all pairs.

    .. math:: \ell = \sum_{i<j} \bigl((v_i - v_j) - (s_i - s_j)\bigr)^2

    Order-preserving (Calauzènes et al. 2013, Table 2). With a_i = v_i - s_i and item weights
    the sum equals (Σ w)·Σ w_i (a_i - ā)² with ā the weighted mean: O(n) (``method="sort"``,
    the default through ``"auto"``; centred, so no cancellation). Its Hessian is constant:
    the diagonal is 2 w_i (Σ_j w_j - w_i).

    References
    ----------
    Calauzènes, Usunier & Gallinari (2013), Table 2, pairwise "Squared Error".
    """
    name = "pairwise_squared"
    b = prepare(scores, labels, where, weights, loss=name)
    method = _method(method, name)
    if method == "dense":
        W, phi, valid = _squared_pairs(b, utility=utility)
        return reduce(_dense(b, W, phi), valid, b, reduction, loss=name)
    return reduce(_pairwise_squared_closed(b, utility, name), b.mask.sum(-1) > 1, b, reduction, loss=name)


def _util(b, u, name):
    v = utility(b.labels, u, loss=name)
    return torch.where(b.mask, v, torch.zeros_like(v))


def _op_utility(b, u, name):
    v = _util(b, u, name)
    if bool((v < 0).any()):
        raise InputError(f"{name}: utilities u(y) must be non-negative; got min {float(v.min()):g}")
    return v


def op_pairwise_loss(scores, labels, *, where=None, weights=None, reduction="mean",
                     utility="linear", phi="logistic", method="auto"):
    r"""Order-preserving pairwise template.

    .. math:: \ell = \sum_{i<j} v_i \varphi(s_i - s_j) + v_j \varphi(s_j - s_i)
       = \sum_{i \ne j} v_i \varphi(s_i - s_j)

    with φ ∈ {``"logistic"``: log(1+e^{-t}), ``"exponential"``: e^{-t} (continued linearly
    beyond an argument of 50, as every exponential here), ``"squared_hinge"``: max(0, 1-t)²}:
    non-increasing, convex, φ'(0) < 0, hence order-preserving (Calauzènes et al. 2013,
    Remark 2). Utilities must be non-negative. Item weights multiply pair terms by w_i w_j.

    Notes
    -----
    ``method="sort"`` (chosen by ``"auto"`` for the exponential and the squared hinge) costs
    O(n log n) per list: the exponential factorises, Σ_{i≠j} v_i e^{s_j - s_i} =
    (Σ_i v_i e^{-s_i})(Σ_j e^{s_j}) minus the diagonal, which a log-cumulative-sum-exp over the
    score order evaluates exactly together with the linear continuation (pairs more than 50 apart);
    the squared hinge is a polynomial on the pairs closer than 1, a suffix of the score order,
    so it reduces to suffix sums of w, w s, w s² (computed centred and in float64). The logistic
    has no such form and stays O(n^2) (``"dense"``).

    References
    ----------
    Calauzènes, Usunier & Gallinari (2013), eq. (4) and Table 2, pairwise "Logistic" /
    "Exponential".
    """
    name = "op_pairwise"
    b = prepare(scores, labels, where, weights, loss=name)
    phi_name = check_choice(phi, "phi", OP_PHIS, name)
    if _use_sort(method, name, "phi", phi_name, "logistic", "'exponential' and 'squared_hinge'", "the logistic"):
        val, _ = _op_sorted(b, _op_utility(b, utility, name), phi_name)
        return reduce(val, b.mask.sum(-1) > 1, b, reduction, loss=name)
    W, f, valid = _op_pairs(b, utility=utility, phi=phi_name)
    return reduce(_dense(b, W, f), valid, b, reduction, loss=name)


# ------------------------------------------------------------------------------------ registry


def _maxcut(m: int) -> float:
    return 2.0 * (m * m // 4)


def _hinge_l2(m: int) -> float:
    # ‖g‖2 <= sqrt(‖g‖1 ‖g‖inf), ‖g‖1 <= 2⌊m²/4⌋, ‖g‖inf <= m - 1
    return math.sqrt(_maxcut(m) * max(m - 1, 0))


def _kendall_norm(m: int) -> float:
    return 2.0 / (m * (m - 1)) if m > 1 else 0.0


def _dense_if(param, dense_value, default):
    """Quadratic memory rule: the dense form (``method="dense"``, or ``param=dense_value``)."""
    return lambda h: h.get("method", "auto") == "dense" or h.get(param, default) == dense_value


def _ranked_weights(h):
    """``rank_weights`` of the pair losses: ΔNDCG pair weights or a top-k truncation (current ranks)."""
    return h.get("pair_weights", "none") == "delta_ndcg" or h.get("truncation_level") is not None


def _op_regret_check(h, bound):
    phi = h.get("phi", "logistic")
    if phi not in ("logistic", "exponential"):
        raise InputError(f"op_pairwise with phi={phi!r} has no Table 2 constant; "
                         "Table 2 covers phi='logistic' and phi='exponential'")


def _op_constant(h, U):
    _op_regret_check(h, {})
    return 2.0 * math.sqrt(u_inf(U, "op_pairwise"))


_SCHEMES = {"none": _engine.W_NONE, "delta_label": _engine.W_LABEL, "delta_ndcg": _engine.W_NDCG}


def _pair_kernel(name, phi, logistic=False, defaults=None):
    """``hyper -> EngineKernel`` of ranknet / lambdarank / pairwise_hinge / rankboost, or None
    where the torch sort-based form is the better tool (pair weights "none"/"delta_label" of the
    hinge and RankBoost: O(n log n)). ``defaults``: hyperparameters the loss fixes or defaults."""
    def make(h):
        h = {**(defaults or {}), **h}
        pw = check_choice(h.get("pair_weights", "none"), "pair_weights", PAIR_WEIGHTS, name)
        if not logistic and pw != "delta_ndcg" and _method(h.get("method", "auto"), name) != "dense":
            return None
        gain = check_choice(h.get("gain", "exp2"), "gain", GAINS, name)
        checks = (_engine.exp2_check(name),) if pw == "delta_ndcg" and gain == "exp2" else ()
        return _engine.pair_kernel(
            _SCHEMES[pw], phi, sigma=check_positive(h.get("sigma", 1.0), "sigma", name),
            truncation_level=check_truncation(h.get("truncation_level"), name),
            norm=check_flag(h.get("norm", False), "norm", name), exp2=gain == "exp2", checks=checks)
    return make


def _op_kernel(h):
    name = "op_pairwise"
    phi = check_choice(h.get("phi", "logistic"), "phi", OP_PHIS, name)
    if phi != "logistic" and _method(h.get("method", "auto"), name) != "dense":
        return None
    u = _engine.utilities(h.get("utility", "linear"), name)
    if u is None:
        return None
    nonneg = _engine.range_check(0.0, math.inf, lambda lo, hi: f"{name}: utilities u(y) must be non-negative; "
                                                               f"got min {lo:g}")
    kind = {"logistic": _engine.PHI_LOGISTIC, "exponential": _engine.PHI_EXP,
            "squared_hinge": _engine.PHI_SQHINGE}[phi]
    return _engine.pair_kernel(_engine.W_OP, kind, utilities=u[0], checks=u[1], v_checks=(nonneg,))


def _squared_kernel(h):
    u = _engine.utilities(h.get("utility", "linear"), "pairwise_squared")
    return None if u is None else _engine.pairwise_squared_kernel(u[0], u[1])


SPECS = [
    LossSpec("pairwise_hinge", pairwise_hinge_loss, "pairwise", True, False,
             _maxcut, _hinge_l2, {"pair_weights": "none", "method": "auto"},
             "Joachims KDD 2002; Chaudhuri & Tewari ICML 2015 §3.3",
             "ℓ∞ constant 2⌊m²/4⌋ is tight (two label levels, equal scores) and grows with m; "
             "O(n log n) Fenwick sweep; Hessian 0 a.e., so the GBDT adapter uses |grad|",
             hessian="abs_grad", valid_when=("ordered_pair",), pair_form=_hinge_pairs,
             kernel=_pair_kernel("pairwise_hinge", _engine.PHI_HINGE),
             quadratic=_dense_if("pair_weights", "delta_ndcg", "none"), rank_weights=_ranked_weights,
             labels_affine=never),
    LossSpec("ranknet", ranknet_loss, "pairwise", True, False,
             lambda m, sigma=1.0: sigma * _maxcut(m), lambda m, sigma=1.0: sigma * _hinge_l2(m),
             {"sigma": 1.0, "pair_weights": "none"}, "Burges et al. ICML 2005",
             "not order-preserving in general (Duchi, Mackey & Jordan ICML 2010); O(n^2)",
             valid_when=("ordered_pair",), pair_form=_ranknet_pairs, quadratic=lambda h: True,
             kernel=_pair_kernel("ranknet", _engine.PHI_LOGISTIC, logistic=True),
             step_weights=lambda h: bool(h.get("norm", False)), rank_weights=_ranked_weights, labels_affine=never),
    LossSpec("lambdarank", lambdarank_loss, "pairwise", False, False, None, None,
             {"sigma": 1.0, "truncation_level": 50, "norm": True, "gain": "exp2"},
             "Burges 2010 (MSR-TR-2010-82); LightGBM's lambdarank (Ke et al. NeurIPS 2017)",
             "ranknet with ΔNDCG weights, LightGBM's truncation and normalisation; O(n T) on the engine",
             smooth_at_ties=False, valid_when=("ordered_pair",), pair_form=_lambdarank_pairs,
             quadratic=lambda h: True,
             kernel=_pair_kernel("lambdarank", _engine.PHI_LOGISTIC, logistic=True,
                                 defaults={"pair_weights": "delta_ndcg", "truncation_level": 50, "norm": True}),
             step_weights=lambda h: bool(h.get("norm", True)), rank_weights=lambda h: True, labels_affine=never),
    LossSpec("rankboost", rankboost_loss, "pairwise", True, False, None, None,
             {"pair_weights": "none", "method": "auto"}, "Freund et al. JMLR 2003",
             "exp continued linearly above 50; O(n log n) log-domain Fenwick sweeps for any score range "
             "(dense O(n^2) for delta_ndcg weights); exact Hessian diagonal from the same sweeps",
             valid_when=("ordered_pair",), pair_form=_rankboost_pairs, fast_terms=_rankboost_fast,
             kernel=_pair_kernel("rankboost", _engine.PHI_EXP),
             quadratic=_dense_if("pair_weights", "delta_ndcg", "none"), rank_weights=_ranked_weights,
             labels_affine=never),
    LossSpec("pairwise_squared", pairwise_squared_loss, "pairwise", True, True, None, None,
             {"utility": "linear", "method": "auto"}, CT,
             "all pairs; O(n) closed form; Hessian diagonal 2 w_i (Σ_j w_j - w_i)",
             valid_when=("two_items",), pair_form=_squared_pairs, fast_terms=_squared_fast, kernel=_squared_kernel,
             quadratic=lambda h: h.get("method", "auto") == "dense",
             regret=RegretRule("pairwise", lambda h, U: 1.0, lambda h: "1"), labels_affine=affine_if_linear_utility),
    LossSpec("op_pairwise", op_pairwise_loss, "pairwise", True, True, None, None,
             {"utility": "linear", "phi": "logistic", "method": "auto"}, CT + ", eq. (4)",
             "Lipschitz constant depends on the utility range; O(n log n) for phi exponential and "
             "squared_hinge, O(n^2) for the logistic",
             valid_when=("two_items",), pair_form=_op_pairs, fast_terms=_op_fast, kernel=_op_kernel,
             quadratic=_dense_if("phi", "logistic", "logistic"),
             regret=RegretRule("pairwise", _op_constant, lambda h: "2√‖U(Δ)‖∞", needs_u=lambda h: True,
                              check=_op_regret_check), labels_affine=affine_if_linear_utility),
    LossSpec("kendall_hinge", kendall_hinge_loss, "pairwise", True, False,
             lambda m: _kendall_norm(m) * _maxcut(m), lambda m: _kendall_norm(m) * _hinge_l2(m),
             {"method": "auto"}, "Shalev-Shwartz & Ben-David 2014, §17.4",
             "averaged over r(r-1)/2 pairs: ℓ∞ constant <= 1 + 1/(m-1), bounded in m; tight",
             hessian="abs_grad", valid_when=("two_items",), pair_form=_kendall_pairs,
             quadratic=lambda h: h.get("method", "auto") == "dense", labels_affine=never),
]
