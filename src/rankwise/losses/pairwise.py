"""Pairwise losses: a term per ordered pair of real items, summed over the pairs of a list.

Every dense pairwise loss here has the *pair form*

.. math:: \\ell(\\mathbf y, \\mathbf s) = \\sum_{i, j} W_{ij}\\, \\varphi_{ij}(s_i - s_j)

with a pair weight matrix ``W`` (zero outside the pairs the loss uses; never differentiated) and
a scalar function of the score difference; :func:`pair_form` returns both, which is how the
GBDT adapter gets an exact diagonal Hessian. Item weights multiply pair weights as
``w_i w_j``; per-list weights multiply the list's sum.

Pair weights (``pair_weights``): ``"none"`` (1), ``"delta_label"`` (|y_i - y_j|), or
``"delta_ndcg"`` (LambdaRank: |G_i - G_j| |1/log2(1+r_i) - 1/log2(1+r_j)| / maxDCG with
G = 2^y - 1 and r the current ranks by score, detached).

Sort-based O(n log n) forms (``method="sort"``, chosen by ``"auto"`` where exact): the RankSVM
hinge and the Kendall hinge (Fenwick sweep, ``_sorted_hinge``), RankBoost (the exponential
factorises: log-cumulative-sum-exp over label-sorted items), and the all-pairs squared loss
(closed form, O(n)). RankNet's logistic has no exact sort-based form and stays O(n^2).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from rankwise.errors import InputError
from rankwise.losses._sorted_hinge import SortedHinge
from rankwise.losses._utils import (
    EXP_CLIP,
    check_choice,
    check_positive,
    ideal_dcg,
    log2p1,
    prepare,
    ranks_from_scores,
    reduce,
    safe_exp,
    utility,
)

PAIR_WEIGHTS = ("none", "delta_label", "delta_ndcg")
METHODS = ("auto", "dense", "sort")


def _ordered_pairs(y, mask):
    """[B, L, L] bool: both real and y_i > y_j."""
    both = mask.unsqueeze(-1) & mask.unsqueeze(-2)
    return both & (y.unsqueeze(-1) > y.unsqueeze(-2))


def _item_product(b):
    if b.item_w is None:
        return None
    return b.item_w.unsqueeze(-1) * b.item_w.unsqueeze(-2)


def delta_ndcg(s, y, mask):
    """|ΔNDCG| of swapping i and j in the current ranking (LambdaRank weights), detached."""
    g = torch.exp2(y) - 1
    r = ranks_from_scores(s, mask)
    inv_d = 1.0 / log2p1(r)
    idcg = ideal_dcg(g, mask)
    w = (g.unsqueeze(-1) - g.unsqueeze(-2)).abs() * (inv_d.unsqueeze(-1) - inv_d.unsqueeze(-2)).abs()
    safe = torch.where(idcg > 0, idcg, torch.ones_like(idcg))
    return torch.where((idcg > 0)[:, None, None], w / safe[:, None, None], torch.zeros_like(w))


def _weights(b, kind, name):
    kind = check_choice(kind, "pair_weights", PAIR_WEIGHTS, name)
    P = _ordered_pairs(b.labels, b.mask)
    W = P.to(b.scores.dtype)
    if kind == "delta_label":
        W = W * (b.labels.unsqueeze(-1) - b.labels.unsqueeze(-2))
    elif kind == "delta_ndcg":
        W = W * delta_ndcg(b.scores, b.labels, b.mask)
    ip = _item_product(b)
    if ip is not None:
        W = W * ip
    return W.detach(), P.flatten(1).any(-1)


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


def _phi_logistic(sigma, scale=1.0):
    return PairPhi(lambda d: F.softplus(-sigma * d) * scale,
                   lambda d: -sigma * scale * torch.sigmoid(-sigma * d),
                   lambda d: sigma * sigma * scale * torch.sigmoid(sigma * d) * torch.sigmoid(-sigma * d))


_phi_hinge = PairPhi(lambda d: torch.relu(1 - d), lambda d: -(d < 1).to(d.dtype),
                     lambda d: torch.zeros_like(d))
_phi_exp = PairPhi(lambda d: safe_exp(-d),
                   lambda d: -torch.exp(torch.clamp(-d, max=EXP_CLIP)),
                   lambda d: torch.where(-d < EXP_CLIP, torch.exp(torch.clamp(-d, max=EXP_CLIP)), torch.zeros_like(d)))
_phi_sq_hinge = PairPhi(lambda d: torch.relu(1 - d) ** 2, lambda d: -2 * torch.relu(1 - d),
                        lambda d: 2 * (d < 1).to(d.dtype))


def pair_form(name: str, b, **hyper):
    """(W, phi, valid) such that the loss of each list is ``sum_ij W_ij phi(s_i - s_j)`` plus a
    constant; ``valid`` marks lists that have at least one pair."""
    if name == "pairwise_hinge":
        W, valid = _weights(b, hyper.get("pair_weights", "none"), name)
        return W, _phi_hinge, valid
    if name == "ranknet":
        sigma = check_positive(hyper.get("sigma", 1.0), "sigma", name)
        W, valid = _weights(b, hyper.get("pair_weights", "none"), name)
        return W, _phi_logistic(sigma), valid
    if name == "rankboost":
        W, valid = _weights(b, hyper.get("pair_weights", "none"), name)
        return W, _phi_exp, valid
    if name == "kendall_hinge":
        W, valid = _weights(b, "none", name)
        r = b.mask.sum(-1).to(b.scores.dtype)
        norm = torch.where(r > 1, 2.0 / (r * (r - 1)).clamp(min=1), torch.zeros_like(r))
        return W * norm[:, None, None], _phi_hinge, r > 1
    if name == "op_pairwise":
        v = utility(b.labels, hyper.get("utility", "linear"), loss=name)
        v = torch.where(b.mask, v, torch.zeros_like(v))
        if bool((v < 0).any()):
            raise InputError(f"{name}: utilities u(y) must be non-negative; got min {float(v.min()):g}")
        phi_name = check_choice(hyper.get("phi", "logistic"), "phi", ("logistic", "exponential", "squared_hinge"), name)
        phi = {"logistic": _phi_logistic(1.0), "exponential": _phi_exp, "squared_hinge": _phi_sq_hinge}[phi_name]
        both = b.mask.unsqueeze(-1) & b.mask.unsqueeze(-2)
        eye = torch.eye(b.scores.shape[-1], dtype=torch.bool, device=b.scores.device)
        both = both & ~eye
        W = both.to(b.scores.dtype) * v.unsqueeze(-1)
        ip = _item_product(b)
        if ip is not None:
            W = W * ip
        return W.detach(), phi, both.flatten(1).any(-1)
    if name == "lambdaloss":
        sigma = check_positive(hyper.get("sigma", 1.0), "sigma", name)
        W, valid = _lambdaloss_weights(b)
        return W, _phi_logistic(sigma, 1.0 / math.log(2.0)), valid
    if name == "pairwise_squared":
        v = utility(b.labels, hyper.get("utility", "linear"), loss=name)
        v = torch.where(b.mask, v, torch.zeros_like(v))
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
    raise InputError(f"no pair form for loss {name!r}")


def _lambdaloss_weights(b):
    """NDCG-Loss2 weights of Wang et al. (2018): δ_ij |G_i - G_j| / maxDCG on pairs y_i > y_j,
    δ_ij = |1/D(|r_i - r_j|) - 1/D(|r_i - r_j| + 1)|, D(k) = log2(1 + k), r = current ranks."""
    P = _ordered_pairs(b.labels, b.mask)
    g = torch.exp2(b.labels) - 1
    r = ranks_from_scores(b.scores, b.mask)
    k = (r.unsqueeze(-1) - r.unsqueeze(-2)).abs().clamp(min=1)
    delta = (1.0 / log2p1(k) - 1.0 / log2p1(k + 1)).abs()
    idcg = ideal_dcg(g, b.mask)
    safe = torch.where(idcg > 0, idcg, torch.ones_like(idcg))
    W = P.to(g.dtype) * delta * (g.unsqueeze(-1) - g.unsqueeze(-2)).abs() / safe[:, None, None]
    W = torch.where((idcg > 0)[:, None, None], W, torch.zeros_like(W))
    ip = _item_product(b)
    if ip is not None:
        W = W * ip
    return W.detach(), P.flatten(1).any(-1)


# ---------------------------------------------------------------------------------------------
# sort-based kernels


def _sorted_hinge(b, c0, c1):
    w = b.item_w if b.item_w is not None else b.mask.to(b.scores.dtype)
    val, tie = SortedHinge.apply(b.scores, b.labels, w, b.mask, c0, c1)
    return val, tie


def _has_ordered_pair(b):
    big = torch.finfo(b.labels.dtype).max
    hi = torch.where(b.mask, b.labels, torch.full_like(b.labels, -big)).max(-1).values
    lo = torch.where(b.mask, b.labels, torch.full_like(b.labels, big)).min(-1).values
    return b.mask.any(-1) & (hi > lo)


def _rankboost_sorted(b, c1):
    """sum_{y_i > y_j} w_i w_j e^{-(s_i - s_j)} = sum_i w_i e^{-s_i} sum_{y_j < y_i} w_j e^{s_j},
    with the inner sums as a log-cumulative-sum-exp over items sorted by label (O(n log n))."""
    s, y, mask = b.scores, b.labels, b.mask
    big = torch.finfo(s.dtype).max
    ysort = torch.where(mask, y, torch.full_like(y, big))
    ys, order = torch.sort(ysort, dim=-1, stable=True)
    ss = torch.gather(s, -1, order)
    ms = torch.gather(mask, -1, order)
    w = b.item_w if b.item_w is not None else mask.to(s.dtype)
    ws = torch.gather(w, -1, order)
    neg = torch.full_like(ss, -1e4 * EXP_CLIP)
    logw = torch.where(ms & (ws > 0), torch.log(torch.where(ws > 0, ws, torch.ones_like(ws))), neg)
    # number of items with a strictly smaller label, for each sorted item
    n_less = torch.searchsorted(ys.contiguous(), ys.contiguous(), right=False)
    valid_item = ms & (n_less > 0)
    gidx = (n_less - 1).clamp(min=0)
    out = 0
    for k, coef in ((0, 1.0), (1, c1)) if c1 else ((0, 1.0),):
        if k == 0:
            a = torch.where(ms, ss + logw, neg)
            lc = torch.logcumsumexp(a, -1)
            inner = torch.gather(lc, -1, gidx)
            term = torch.exp(torch.where(valid_item, -ss + logw + inner, neg))
            if c1:  # delta_label: (y_i - y_j) = y_i * [.] - [y_j .]
                term = term * torch.where(ms, ys, torch.zeros_like(ys))
            out = out + term.sum(-1)
        else:  # subtract sum_i w_i e^{-s_i} sum_{y_j < y_i} w_j y_j e^{s_j}  (labels >= 0 assumed)
            yl = torch.log(torch.where(ms & (ys > 0), ys, torch.ones_like(ys)))
            a = torch.where(ms & (ys > 0), ss + logw + yl, neg)
            lc = torch.logcumsumexp(a, -1)
            inner = torch.gather(lc, -1, gidx)
            term = torch.exp(torch.where(valid_item, -ss + logw + inner, neg))
            out = out - term.sum(-1)
    return out


# ---------------------------------------------------------------------------------------------
# the losses


def _method(method, name):
    return check_choice(method, "method", METHODS, name)


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
    method = _method(method, name)
    pw = check_choice(pair_weights, "pair_weights", PAIR_WEIGHTS, name)
    if method == "sort" and pw == "delta_ndcg":
        raise InputError(f"{name}: method='sort' supports pair_weights 'none' and 'delta_label'; "
                         "delta_ndcg needs method='dense' (or 'auto')")
    if method != "dense" and pw != "delta_ndcg":
        c0, c1 = (1.0, 0.0) if pw == "none" else (0.0, 1.0)
        val, _ = _sorted_hinge(b, c0, c1)
        return reduce(val, _has_ordered_pair(b), b, reduction, loss=name)
    W, phi, valid = pair_form(name, b, pair_weights=pw)
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
    W, phi, valid = pair_form(name, b)
    # tied pairs: constant 1 each (weighted by w_i w_j)
    both = b.mask.unsqueeze(-1) & b.mask.unsqueeze(-2)
    tied = both & (b.labels.unsqueeze(-1) == b.labels.unsqueeze(-2))
    tied = torch.triu(tied, 1).to(b.scores.dtype)
    ip = _item_product(b)
    if ip is not None:
        tied = tied * ip
    return reduce(_dense(b, W, phi) + norm * tied.sum((-1, -2)), valid, b, reduction, loss=name)


def ranknet_loss(scores, labels, *, where=None, weights=None, reduction="mean", sigma=1.0,
                 pair_weights="none"):
    r"""RankNet pairwise logistic loss.

    .. math:: \ell = \sum_{y_i > y_j} \omega_{ij} \log\bigl(1 + e^{-\sigma (s_i - s_j)}\bigr)

    With ``pair_weights="delta_ndcg"`` this is the LambdaRank objective. O(n^2) per list (no
    exact sort-based form for the logistic). Convex.

    References
    ----------
    C. Burges et al. "Learning to rank using gradient descent." ICML 2005.
    C. Burges. "From RankNet to LambdaRank to LambdaMART: an overview." MSR-TR-2010-82.
    """
    name = "ranknet"
    b = prepare(scores, labels, where, weights, loss=name)
    W, phi, valid = pair_form(name, b, sigma=sigma, pair_weights=pair_weights)
    return reduce(_dense(b, W, phi), valid, b, reduction, loss=name)


def rankboost_loss(scores, labels, *, where=None, weights=None, reduction="mean",
                   pair_weights="none", method="auto"):
    r"""RankBoost pairwise exponential loss.

    .. math:: \ell = \sum_{y_i > y_j} \omega_{ij}\, e^{-(s_i - s_j)}

    The exponential factorises, so ``method="sort"`` computes it in O(n log n) by a
    log-cumulative-sum-exp over label-sorted items (pair weights "none" or "delta_label",
    non-negative labels). The dense form continues the exponential linearly beyond an argument
    of 50 (finite for scores up to 1e4); ``"auto"`` uses the sorted form only when every list's
    score range is at most 50, where both agree exactly.

    References
    ----------
    Y. Freund, R. Iyer, R. Schapire, Y. Singer. "An efficient boosting algorithm for combining
    preferences." JMLR 4, 2003.
    """
    name = "rankboost"
    b = prepare(scores, labels, where, weights, loss=name)
    method = _method(method, name)
    pw = check_choice(pair_weights, "pair_weights", PAIR_WEIGHTS, name)
    sortable = pw != "delta_ndcg" and (pw == "none" or not bool((b.labels < 0).any()))
    if method == "sort" and not sortable:
        raise InputError(f"{name}: method='sort' supports pair_weights 'none' and 'delta_label' "
                         "(non-negative labels); use method='dense'")
    if method == "auto" and sortable:
        sd = b.scores.detach()
        big = torch.finfo(sd.dtype).max
        rng = (torch.where(b.mask, sd, torch.full_like(sd, -big)).max(-1).values
               - torch.where(b.mask, sd, torch.full_like(sd, big)).min(-1).values)
        rng = torch.where(b.mask.any(-1), rng, torch.zeros_like(rng))
        method = "sort" if bool((rng <= EXP_CLIP).all()) else "dense"
    if method == "sort":
        val = _rankboost_sorted(b, 1.0 if pw == "delta_label" else 0.0)
        return reduce(val, _has_ordered_pair(b), b, reduction, loss=name)
    W, phi, valid = pair_form(name, b, pair_weights=pw)
    return reduce(_dense(b, W, phi), valid, b, reduction, loss=name)


def pairwise_squared_loss(scores, labels, *, where=None, weights=None, reduction="mean",
                          utility="linear", method="auto"):
    r"""Pairwise squared template over all pairs.

    .. math:: \ell = \sum_{i<j} \bigl((v_i - v_j) - (s_i - s_j)\bigr)^2

    Order-preserving (Calauzènes et al. 2013, Table 2). With a_i = v_i - s_i and item weights
    the sum equals (Σ w)·Σ w_i (a_i - ā)² with ā the weighted mean: O(n) (``method="sort"``,
    the default through ``"auto"``; centred, so no cancellation).

    References
    ----------
    Calauzènes, Usunier & Gallinari (2013), Table 2, pairwise "Squared Error".
    """
    name = "pairwise_squared"
    b = prepare(scores, labels, where, weights, loss=name)
    method = _method(method, name)
    if method == "dense":
        W, phi, valid = pair_form(name, b, utility=utility)
        return reduce(_dense(b, W, phi), valid, b, reduction, loss=name)
    v = _util(b, utility, name)
    a = torch.where(b.mask, v - b.scores, torch.zeros_like(v))
    w = b.item_w if b.item_w is not None else b.mask.to(a.dtype)
    sw = w.sum(-1)
    abar = (w * a).sum(-1) / sw.clamp(min=torch.finfo(a.dtype).tiny)
    val = sw * (w * (a - abar.unsqueeze(-1)) ** 2).sum(-1)
    return reduce(val, b.mask.sum(-1) > 1, b, reduction, loss=name)


def _util(b, u, name):
    v = utility(b.labels, u, loss=name)
    return torch.where(b.mask, v, torch.zeros_like(v))


def op_pairwise_loss(scores, labels, *, where=None, weights=None, reduction="mean",
                     utility="linear", phi="logistic"):
    r"""Order-preserving pairwise template.

    .. math:: \ell = \sum_{i<j} v_i \varphi(s_i - s_j) + v_j \varphi(s_j - s_i)
       = \sum_{i \ne j} v_i \varphi(s_i - s_j)

    with φ ∈ {``"logistic"``: log(1+e^{-t}), ``"exponential"``: e^{-t}, ``"squared_hinge"``:
    max(0, 1-t)²}: non-increasing, convex, φ'(0) < 0, hence order-preserving (Calauzènes et
    al. 2013, Remark 2). Utilities must be non-negative. O(n^2).

    References
    ----------
    Calauzènes, Usunier & Gallinari (2013), eq. (4) and Table 2, pairwise "Logistic" /
    "Exponential".
    """
    name = "op_pairwise"
    b = prepare(scores, labels, where, weights, loss=name)
    W, f, valid = pair_form(name, b, utility=utility, phi=phi)
    return reduce(_dense(b, W, f), valid, b, reduction, loss=name)
