"""Listwise losses: one value per list from the whole score vector.

Item weights multiply each item's term (ListNet: the cross-entropy term of item i; ListMLE:
the term of the item at position k of the label order; ApproxNDCG / smoothed DCG: item i's
gain; Bregman: item i's term; LambdaLoss: pair terms by w_i w_j). Per-list weights multiply
the list's value. Masked items are excluded before any softmax (never a ``-inf`` that could
turn a gradient into NaN).
"""
from __future__ import annotations

import math

import numpy as np

from rankwise._validation import check_k
from rankwise.errors import InputError
from rankwise.losses import _engine
from rankwise.losses._deferred import deferred
from rankwise.losses._spec import (CT, LossSpec, RegretRule, affine_if_linear_gain, affine_if_linear_utility, never,
                                   positive_param, u_inf)
from rankwise.losses._utils import (
    check_choice,
    check_pair_memory,
    check_positive,
    gains,
    ideal_dcg,
    log2p1,
    prepare,
    ranks_from_scores,
    reduce,
    safe_exp,
    scaled_gains,
    utility,
)
from rankwise.losses.pairwise import (
    GAINS,
    _dense,
    _item_product,
    _ordered_pairs,
    _phi_logistic,
    check_flag,
    check_truncation,
    lambdarank_options,
)

torch = deferred("torch", globals())


def _masked_log_softmax(x, mask):
    row_any = mask.any(-1, keepdim=True)
    fill = torch.where(row_any, torch.full_like(x[..., :1], -math.inf), torch.zeros_like(x[..., :1]))
    z = torch.where(mask, x, fill.expand_as(x))
    lp = torch.log_softmax(z, dim=-1)
    return torch.where(mask, lp, torch.zeros_like(lp))


def _iw(b):
    return b.item_w if b.item_w is not None else b.mask.to(b.scores.dtype)


def listnet_loss(scores, labels, *, where=None, weights=None, reduction="mean", temperature=1.0):
    r"""ListNet top-one cross-entropy.

    .. math:: \ell = -\sum_i P_y(i) \log P_s(i), \quad
       P_y = \operatorname{softmax}(\mathbf y), \; P_s = \operatorname{softmax}(\mathbf s / \tau)

    Convex in s. ℓ∞ Lipschitz constant 2/τ and ℓ2 constant √2/τ, independent of the list length
    (the gradient is (P_s - P_y)/τ).

    References
    ----------
    Z. Cao, T. Qin, T.-Y. Liu, M.-F. Tsai, H. Li. "Learning to rank: from pairwise approach to
    listwise approach." ICML 2007.
    Chaudhuri & Tewari (2015), Proposition 1.
    """
    name = "listnet"
    b = prepare(scores, labels, where, weights, loss=name)
    tau = check_positive(temperature, "temperature", name)
    py = torch.exp(_masked_log_softmax(b.labels, b.mask))
    py = torch.where(b.mask, py, torch.zeros_like(py))
    lps = _masked_log_softmax(b.scores / tau, b.mask)
    per = -(_iw(b) * py * lps).sum(-1)
    return reduce(per, b.mask.any(-1), b, reduction, loss=name)


def listmle_loss(scores, labels, *, where=None, weights=None, reduction="mean"):
    r"""ListMLE: negative Plackett-Luce log-likelihood of the label order.

    .. math:: \ell = \sum_{k=1}^{r} \Bigl(\log \sum_{l \ge k} e^{s_{\pi(l)}} - s_{\pi(k)}\Bigr)

    π sorts labels in descending order; ties in labels are broken by input order (stable), so
    the loss is smooth in s. Convex.

    References
    ----------
    F. Xia, T.-Y. Liu, J. Wang, W. Zhang, H. Li. "Listwise approach to learning to rank:
    theory and algorithm." ICML 2008.
    """
    name = "listmle"
    b = prepare(scores, labels, where, weights, loss=name)
    s, y, mask = b.scores, b.labels, b.mask
    ykey = torch.where(mask, y, torch.full_like(y, -math.inf))
    order = torch.sort(ykey, dim=-1, descending=True, stable=True).indices
    ss = torch.gather(s, -1, order)
    ms = torch.gather(mask, -1, order)
    ws = torch.gather(_iw(b), -1, order)
    sd = s.detach()
    low = torch.where(mask, sd, torch.full_like(sd, math.inf)).min(-1, keepdim=True).values
    low = torch.where(torch.isfinite(low), low, torch.zeros_like(low)) - 1000.0
    z = torch.where(ms, ss, low.expand_as(ss))
    suffix = torch.logcumsumexp(z.flip(-1), -1).flip(-1)
    term = torch.where(ms, suffix - ss, torch.zeros_like(ss))
    per = (ws * term).sum(-1)
    return reduce(per, mask.any(-1), b, reduction, loss=name)


def smooth_dcg_loss(scores, labels, *, where=None, weights=None, reduction="mean", k=10,
                    sigma=1.0, gain="exp2"):
    r"""Negative smoothed NDCG@k of SmoothRank.

    .. math:: \ell = -\frac{1}{\max\mathrm{DCG@}k} \sum_{j=1}^{k} \frac{1}{\log_2(1+j)}
       \sum_i G(y_i)\, h_{ij}, \quad
       h_{ij} = \frac{e^{-(s_i - s_{d(j)})^2/\sigma}}{\sum_l e^{-(s_l - s_{d(j)})^2/\sigma}}

    d(j) is the item at rank j of the current scores. As σ → 0 it tends to -NDCG@k. Not
    convex. A list whose max DCG@k is 0 has nothing to rank: it gives 0 and is left out of the
    mean. Gains are divided by the list's largest one before summing (the ratio is unchanged),
    so only a gain 2^y - 1 that itself overflows is refused.

    References
    ----------
    O. Chapelle, M. Wu. "Gradient descent optimization of smoothed information retrieval
    metrics." Information Retrieval 13(3):216-235, 2010.
    """
    name = "smooth_dcg"
    b = prepare(scores, labels, where, weights, loss=name)
    sigma = check_positive(sigma, "sigma", name)
    k = check_k(k, f"{name}: k", allow_none=False)
    s, mask = b.scores, b.mask
    g0 = scaled_gains(gains(b.labels, gain, loss=name), mask)
    g = g0 * _iw(b)
    L = s.shape[-1]
    kk = min(k, L)
    order = torch.sort(torch.where(mask, s.detach(), torch.full_like(s, -math.inf)), dim=-1,
                       descending=True, stable=True).indices[:, :kk]
    top = torch.gather(s, -1, order)  # [B, kk] scores of the items at ranks 1..kk
    # differences beyond sqrt(800 σ) get h = e^-800 = 0 anyway: clamping them keeps (s_i - s_d(j))²
    # finite for huge scores (an inf there would make the gradient NaN) and changes nothing else
    lim = math.sqrt(800.0 * sigma)
    e = -(torch.clamp(s.unsqueeze(-2) - top.unsqueeze(-1), -lim, lim) ** 2) / sigma  # [B, kk, L]
    h = torch.exp(_masked_log_softmax(e, mask.unsqueeze(-2).expand_as(e)))
    h = torch.where(mask.unsqueeze(-2), h, torch.zeros_like(h))
    ranks = torch.arange(1, kk + 1, dtype=s.dtype, device=s.device)
    present = torch.arange(kk, device=s.device).unsqueeze(0) < mask.sum(-1, keepdim=True)
    disc = torch.where(present, 1.0 / log2p1(ranks), torch.zeros_like(present, dtype=s.dtype))
    dcg = (disc.unsqueeze(-1) * h * g.unsqueeze(-2)).sum((-1, -2))
    idcg = ideal_dcg(g0, mask, k)
    per = torch.where(idcg > 0, -dcg / torch.where(idcg > 0, idcg, torch.ones_like(idcg)), torch.zeros_like(idcg))
    return reduce(per, mask.any(-1) & (idcg > 0), b, reduction, loss=name)


def smooth_dcg1_loss(scores, labels, *, where=None, weights=None, reduction="mean", sigma=1.0,
                     gain="exp2"):
    r"""Negative smoothed DCG@1 (softmax form).

    .. math:: \ell = -D(1) \sum_i G(y_i) \frac{e^{s_i/\sigma}}{\sum_j e^{s_j/\sigma}}, \quad D(1) = 1

    Not convex. Its gradient is -p_i (G_i - Σ_j p_j G_j)/σ, so the ℓ∞ Lipschitz constant is at
    most G_max/(2σ), independent of the list length (Chaudhuri & Tewari 2015, Prop. 2, state
    the looser 2 G_max/σ form).

    References
    ----------
    Chaudhuri & Tewari (2015), §3.2 and Proposition 2; Chapelle & Wu (2010).
    """
    name = "smooth_dcg1"
    b = prepare(scores, labels, where, weights, loss=name)
    sigma = check_positive(sigma, "sigma", name)
    p = torch.exp(_masked_log_softmax(b.scores / sigma, b.mask))
    p = torch.where(b.mask, p, torch.zeros_like(p))
    g = gains(b.labels, gain, loss=name) * _iw(b)
    return reduce(-(p * g).sum(-1), b.mask.any(-1), b, reduction, loss=name)


def approx_ndcg_loss(scores, labels, *, where=None, weights=None, reduction="mean", alpha=10.0,
                     gain="exp2"):
    r"""ApproxNDCG: NDCG with positions replaced by a sigmoid approximation.

    .. math:: \ell = -\frac{1}{\max\mathrm{DCG}} \sum_i \frac{G(y_i)}{\log_2(1 + \hat\pi_i)},
       \quad \hat\pi_i = 1 + \sum_{j \ne i} \frac{1}{1 + e^{\alpha (s_i - s_j)}}

    Not convex. A list whose max DCG is 0 has nothing to rank: it gives 0 and is left out of
    the mean. Gains are divided by the list's largest one before summing (the ratio is
    unchanged), so only a gain 2^y - 1 that itself overflows is refused.

    References
    ----------
    T. Qin, T.-Y. Liu, H. Li. "A general approximation framework for direct optimization of
    information retrieval measures." Information Retrieval 13(4):375-397, 2010.
    """
    name = "approx_ndcg"
    b = prepare(scores, labels, where, weights, loss=name)
    alpha = check_positive(alpha, "alpha", name)
    check_pair_memory(b, name)
    s, mask = b.scores, b.mask
    both = mask.unsqueeze(-1) & mask.unsqueeze(-2)
    eye = torch.eye(s.shape[-1], dtype=torch.bool, device=s.device)
    sig = torch.sigmoid(-alpha * (s.unsqueeze(-1) - s.unsqueeze(-2)))
    pos = 1 + torch.where(both & ~eye, sig, torch.zeros_like(sig)).sum(-1)
    g = scaled_gains(gains(b.labels, gain, loss=name), mask)
    dcg = (_iw(b) * g / log2p1(pos)).sum(-1)
    idcg = ideal_dcg(g, mask)
    per = torch.where(idcg > 0, -dcg / torch.where(idcg > 0, idcg, torch.ones_like(idcg)), torch.zeros_like(idcg))
    return reduce(per, mask.any(-1) & (idcg > 0), b, reduction, loss=name)


LAMBDALOSS_WEIGHTS = ("ndcg2", "ndcg1", "ndcg2pp", "lambdarank", "arp1", "arp2")


def lambdaloss_loss(scores, labels, *, where=None, weights=None, reduction="mean", sigma=1.0, weighting="ndcg2pp",
                    mu=5.0, truncation_level=None, norm=False, gain="exp2"):
    r"""The LambdaLoss framework: a pairwise logistic loss whose pair weights make it a bound of a
    ranking metric.

    .. math:: \ell = \sum_{(i, j)} W_{ij} \log_2\bigl(1 + e^{-\sigma (s_i - s_j)}\bigr)

    ``weighting`` (pairs y_i > y_j unless said otherwise; G = gain / maxDCG, D_i = log2(1 + r_i),
    r the current ranks by score, ties broken by input order, all held constant in the step):

    - ``"ndcg2"`` (NDCG-Loss2): W = δ_ij |G_i - G_j| with
      δ_ij = |1/D(|r_i - r_j|) - 1/D(|r_i - r_j| + 1)|, D(k) = log2(1 + k);
    - ``"ndcg1"`` (NDCG-Loss1): W = G_i / D_i on *every* ordered pair i ≠ j, whatever the labels
      (the rank of i counts every item scored above it; a list counts when it has two items
      and a positive max DCG);
    - ``"lambdarank"``: W = |G_i - G_j| |1/D_i - 1/D_j| (LambdaRank's ΔNDCG as a member of the
      framework);
    - ``"ndcg2pp"`` (NDCG-Loss2++, default, μ = 5): μ δ_ij |G_i - G_j| + |G_i - G_j| |1/D_i - 1/D_j|
      (NDCG-Loss2's rank-distance weight plus LambdaRank's position-aware one);
    - ``"arp1"`` (ARP-Loss1): every ordered pair i ≠ j, W = y_i (labels must be non-negative);
    - ``"arp2"`` (ARP-Loss2): W = y_i - y_j.

    ``truncation_level`` (the paper's @k variants, and LightGBM's truncation) keeps the pairs
    with an item among the current top k and normalises by max DCG@k; ``norm`` applies
    LightGBM's lambda normalisation (see :func:`rankwise.losses.ranknet_loss`). Item weights
    multiply W by w_i w_j. A list without an ordered pair, or whose max DCG is 0 (NDCG
    weightings), gives 0 (ARP-Loss1: a list of fewer than two items). Piecewise smooth: the
    weights jump where two scores cross. With GBDT the Hessian is the paper's: the second
    derivative of the logistic with the weights fixed, Σ_j W_ij σ² p_ij (1 - p_ij) / ln 2.

    The defaults (NDCG-Loss2++, μ = 5, every pair, no normalisation) were chosen on validation
    queries (docs/losses.md, "Defaults chosen by measurement"): NDCG-Loss2 alone weights a pair by
    the distance of its ranks wherever it sits, so on long lists most of its gradient lies below
    the top positions that NDCG@k measures.

    References
    ----------
    X. Wang, C. Li, N. Golbandi, M. Bendersky, M. Najork. "The LambdaLoss framework for ranking
    metric optimization." CIKM 2018 (NDCG-Loss1/2/2++, ARP-Loss1/2, LambdaRank weights).
    """
    name = "lambdaloss"
    b = prepare(scores, labels, where, weights, loss=name)
    W, phi, valid = _lambdaloss_pairs(b, sigma=sigma, weighting=weighting, mu=mu, truncation_level=truncation_level,
                                      norm=norm, gain=gain)
    return reduce(_dense(b, W, phi), valid, b, reduction, loss=name)


def _lambdaloss_weights(b, weighting, mu, k, gain):
    """The LambdaLoss pair weights (see :func:`lambdaloss_loss`), detached, and the valid lists."""
    name = "lambdaloss"
    check_pair_memory(b, name)
    P = _ordered_pairs(b.labels, b.mask)
    y = b.labels
    if weighting == "arp1":
        if bool((torch.where(b.mask, y, torch.zeros_like(y)) < 0).any()):
            raise InputError(f"{name}: weighting='arp1' needs non-negative labels; got min {float(y[b.mask].min()):g}")
        both = b.mask.unsqueeze(-1) & b.mask.unsqueeze(-2)
        both = both & ~torch.eye(y.shape[-1], dtype=torch.bool, device=y.device)
        W, valid = both.to(y.dtype) * y.unsqueeze(-1), both.flatten(1).any(-1)
    elif weighting == "arp2":
        W, valid = P.to(y.dtype) * (y.unsqueeze(-1) - y.unsqueeze(-2)), P.flatten(1).any(-1)
    else:
        g = scaled_gains(gains(y, check_choice(gain, "gain", GAINS, name), loss=name), b.mask)
        r = ranks_from_scores(b.scores, b.mask)
        inv_d = 1.0 / log2p1(r)
        dg = (g.unsqueeze(-1) - g.unsqueeze(-2)).abs()
        lambdarank = dg * (inv_d.unsqueeze(-1) - inv_d.unsqueeze(-2)).abs()
        kk = (r.unsqueeze(-1) - r.unsqueeze(-2)).abs().clamp(min=1)
        ndcg2 = (1.0 / log2p1(kk) - 1.0 / log2p1(kk + 1)).abs() * dg
        W = {"ndcg2": lambda: ndcg2, "ndcg1": lambda: (g * inv_d).unsqueeze(-1).expand_as(dg),
             "lambdarank": lambda: lambdarank, "ndcg2pp": lambda: mu * ndcg2 + lambdarank}[weighting]()
        idcg = ideal_dcg(g, b.mask, k)
        safe = torch.where(idcg > 0, idcg, torch.ones_like(idcg))
        if weighting == "ndcg1":  # every ordered pair i != j: the rank of i counts every item above it
            P = b.mask.unsqueeze(-1) & b.mask.unsqueeze(-2) & ~torch.eye(y.shape[-1], dtype=torch.bool,
                                                                         device=y.device)
        W = torch.where((idcg > 0)[:, None, None], P.to(g.dtype) * W / safe[:, None, None], torch.zeros_like(W))
        valid = P.flatten(1).any(-1) & (idcg > 0 if weighting == "ndcg1" else True)
    ip = _item_product(b)
    if ip is not None:
        W = W * ip
    return W.detach(), valid


def _lambdaloss_hyper(sigma=1.0, weighting="ndcg2pp", mu=5.0, truncation_level=None, norm=False, gain="exp2", **_):
    name = "lambdaloss"
    return (check_positive(sigma, "sigma", name), check_choice(weighting, "weighting", LAMBDALOSS_WEIGHTS, name),
            check_positive(mu, "mu", name, allow_zero=True), check_truncation(truncation_level, name),
            check_flag(norm, "norm", name), check_choice(gain, "gain", GAINS, name))


def _lambdaloss_pairs(b, **hyper):
    sigma, weighting, mu, T, norm, gain = _lambdaloss_hyper(**hyper)
    W, valid = _lambdaloss_weights(b, weighting, mu, T, gain)
    phi = _phi_logistic(sigma, 1.0 / math.log(2.0))
    return lambdarank_options(b, W, phi, T, norm), phi, valid


PSI = ("squared", "kl")
LINKS = ("identity", "exp")


def bregman_loss(scores, labels, *, where=None, weights=None, reduction="mean", utility="linear",
                 psi="squared", link="identity"):
    r"""Bregman-divergence template B_ψ(v ‖ g(s)) with an order-preserving link g.

    .. math:: \ell = \psi(\mathbf v) - \psi(g(\mathbf s))
       - \langle \nabla\psi(g(\mathbf s)), \mathbf v - g(\mathbf s) \rangle

    ``psi="squared"`` (ψ = ½‖x‖²): ½ Σ (v_i - g_i)²; ``psi="kl"`` (ψ = Σ x log x - x on
    R₊, needs ``link="exp"``): Σ v_i log(v_i / g_i) - v_i + g_i. Links: ``"identity"``,
    ``"exp"`` (coordinate-wise, strictly increasing, so order-preserving; the exponential
    is continued linearly above 50 so the value stays finite). Convex for (squared, identity)
    and (kl, exp); (squared, exp) is not convex.

    References
    ----------
    P. Ravikumar, A. Tewari, E. Yang. "On NDCG consistency of listwise ranking methods."
    AISTATS 2011. Calauzènes, Usunier & Gallinari (2013), eq. (5).
    """
    name = "bregman"
    b = prepare(scores, labels, where, weights, loss=name)
    psi = check_choice(psi, "psi", PSI, name)
    link = check_choice(link, "link", LINKS, name)
    v = _u(b, utility, name)
    g = b.scores if link == "identity" else safe_exp(b.scores)
    if psi == "squared":
        term = 0.5 * (v - g) ** 2
    else:
        if link != "exp":
            raise InputError(f"{name}: psi='kl' is defined on positive vectors and needs link='exp'; got link={link!r}")
        if bool((v < 0).any()):
            raise InputError(f"{name}: psi='kl' needs non-negative utilities; got min {float(v.min()):g}")
        vlogv = torch.where(v > 0, v * torch.log(torch.where(v > 0, v, torch.ones_like(v))), torch.zeros_like(v))
        # log g on the linear continuation only: log(e^s) underflows for s << 0 (a NaN gradient)
        logg = torch.where(b.scores > 50, torch.log(torch.where(b.scores > 50, g, torch.ones_like(g))), b.scores)
        term = vlogv - v * logg - v + g
    term = torch.where(b.mask, _iw(b) * term, torch.zeros_like(term))
    return reduce(term.sum(-1), b.mask.any(-1), b, reduction, loss=name)


def _u(b, u, name):
    v = utility(b.labels, u, loss=name)
    return torch.where(b.mask, v, torch.zeros_like(v))


# ------------------------------------------------------------------------------------ registry


def _listnet_hessian(b, *, temperature=1.0, **_):
    """(Σ_i w_i P_y(i)) p_k (1 - p_k) / τ²: the exact diagonal of ListNet's Hessian."""
    tau = float(temperature)
    s, y, mask = b.scores.detach(), b.labels, b.mask
    py = torch.softmax(torch.where(mask, y, torch.full_like(y, -math.inf)), -1)
    py = torch.where(mask, py, torch.zeros_like(py))
    c = (_iw(b) * py).sum(-1, keepdim=True)
    p = torch.softmax(torch.where(mask, s / tau, torch.full_like(s, -math.inf)), -1)
    p = torch.where(mask, p, torch.zeros_like(p))
    return c * p * (1 - p) / tau ** 2


def _listmle_hessian(b, **_):
    """Σ over the suffix sets containing k of w p (1 - p): the exact diagonal of ListMLE's Hessian."""
    check_pair_memory(b, "listmle")
    s, y, mask = b.scores.detach(), b.labels, b.mask
    ykey = torch.where(mask, y, torch.full_like(y, -math.inf))
    order = torch.sort(ykey, dim=-1, descending=True, stable=True).indices
    ss = torch.gather(s, -1, order)
    ms = torch.gather(mask, -1, order)
    ws = torch.gather(_iw(b), -1, order)
    low = torch.where(ms, ss, torch.full_like(ss, math.inf)).min(-1, keepdim=True).values - 1000.0
    z = torch.where(ms, ss, low.expand_as(ss))
    lse = torch.logcumsumexp(z.flip(-1), -1).flip(-1)  # lse over suffix k
    L = s.shape[-1]
    tri = torch.tril(torch.ones(L, L, dtype=torch.bool, device=s.device))  # [pos i, k]: k <= i
    p = torch.exp(z.unsqueeze(-1) - lse.unsqueeze(-2))  # [B, i, k]
    keep = tri & ms.unsqueeze(-1) & ms.unsqueeze(-2)
    hs = (torch.where(keep, p * (1 - p), torch.zeros_like(p)) * ws.unsqueeze(-2)).sum(-1)
    return torch.zeros_like(hs).scatter(-1, order, hs)


def bregman_modulus(psi: str = "squared", link: str = "identity", U=None) -> float:
    """Strong-convexity modulus μ of ψ on the domain Theorem 5.3's proof needs.

    ``psi="squared"``: 1. ``psi="kl"`` (``link="exp"`` only): ``1 / ‖U(Δ)‖_∞`` (``inf`` when U = 0):
    on the segment between u and g(s*) every coordinate is at most ‖U(Δ)‖_∞, where ∇²ψ = diag(1/x)
    is at least 1/‖U(Δ)‖_∞.
    """
    if psi not in PSI:
        raise InputError(f"psi must be one of {PSI} (the ψ whose modulus is known); got {psi!r}")
    if link not in LINKS:
        raise InputError(f"link must be one of {LINKS}; got {link!r}")
    if psi == "squared":
        return 1.0
    if link != "exp":
        raise InputError(f"psi='kl' is defined on positive vectors and needs link='exp'; got link={link!r}")
    top = u_inf(U, "bregman with psi='kl'")
    return math.inf if top == 0.0 else 1.0 / top


def _bregman_constant(h, U):
    mu_psi = bregman_modulus(h.get("psi", "squared"), h.get("link", "identity"),
                             U if h.get("psi", "squared") == "kl" else None)
    mu = h.get("mu")
    if mu is None:
        mu = mu_psi
    else:
        mu = positive_param(h, "mu")
        if mu > mu_psi * (1.0 + 1e-12):
            raise InputError(f"mu must not exceed the strong-convexity modulus of psi={h.get('psi', 'squared')!r} "
                             f"on the relevant domain ({mu_psi:.6g}); got mu={mu!r}: a larger mu would make "
                             "the bound invalid")
    return 0.0 if math.isinf(mu) else 2.0 / math.sqrt(mu)


def _bregman_check(h, bound):
    bregman_modulus(h.get("psi", "squared"), h.get("link", "identity"), U=[1.0])
    if "mu" in bound:
        positive_param(bound, "mu")


_LL_SCHEMES = {"ndcg2": _engine.W_LL_NDCG2, "ndcg1": _engine.W_LL_NDCG1, "lambdarank": _engine.W_LL_LAMBDARANK,
               "ndcg2pp": _engine.W_LL_NDCG2PP, "arp2": _engine.W_LABEL, "arp1": _engine.W_OP}


def _lambdaloss_kernel(h):
    name = "lambdaloss"
    sigma, weighting, mu, T, norm, gain = _lambdaloss_hyper(**h)
    checks, v_checks = (), ()
    if weighting == "arp1":
        v_checks = (_engine.range_check(0.0, math.inf, lambda lo, hi: (
            f"{name}: weighting='arp1' needs non-negative labels; got min {lo:g}")),)
    elif weighting != "arp2" and gain == "exp2":
        checks = (_engine.exp2_check(name),)
    return _engine.pair_kernel(_LL_SCHEMES[weighting], _engine.PHI_LOGISTIC, sigma=sigma, scale=1.0 / math.log(2.0),
                               truncation_level=T, norm=norm, mu=mu, exp2=gain == "exp2", checks=checks,
                               v_checks=v_checks)


def _gain_flag(gain, name):
    """exp2 flag of a "exp2"/"linear" gain, None for a callable (no kernel)."""
    if callable(gain):
        return None
    if gain not in ("exp2", "linear"):
        raise InputError(f"{name}: gain must be 'exp2', 'linear' or a callable; got {gain!r}")
    return gain == "exp2"


def _gain_checks(exp2, name):
    return (_engine.exp2_check(name),) if exp2 else ()


def _smooth_dcg_kernel(h):
    name = "smooth_dcg"
    exp2 = _gain_flag(h.get("gain", "exp2"), name)
    if exp2 is None:
        return None
    return _engine.smooth_dcg_kernel(check_k(h.get("k", 10), f"{name}: k", allow_none=False), check_positive(h.get("sigma", 1.0), "sigma", name),
                                     exp2, _gain_checks(exp2, name))


def _smooth_dcg1_kernel(h):
    name = "smooth_dcg1"
    exp2 = _gain_flag(h.get("gain", "exp2"), name)
    if exp2 is None:
        return None
    gain = (lambda y: np.exp2(y) - 1.0) if exp2 else (lambda y: y)
    return _engine.smooth_dcg1_kernel(check_positive(h.get("sigma", 1.0), "sigma", name), gain,
                                      _gain_checks(exp2, name))


def _approx_ndcg_kernel(h):
    name = "approx_ndcg"
    exp2 = _gain_flag(h.get("gain", "exp2"), name)
    if exp2 is None:
        return None
    return _engine.approx_ndcg_kernel(check_positive(h.get("alpha", 10.0), "alpha", name), exp2,
                                      _gain_checks(exp2, name))


def _bregman_kernel(h):
    name = "bregman"
    psi = check_choice(h.get("psi", "squared"), "psi", PSI, name)
    link = check_choice(h.get("link", "identity"), "link", LINKS, name)
    u = _engine.utilities(h.get("utility", "linear"), name)
    if u is None:
        return None
    if psi == "squared":
        kind = _engine.PT_BREG_SQ_ID if link == "identity" else _engine.PT_BREG_SQ_EXP
        return _engine.pointwise_kernel(kind, utilities=u[0], checks=u[1])
    if link != "exp":
        raise InputError(f"{name}: psi='kl' is defined on positive vectors and needs link='exp'; got link={link!r}")
    nonneg = _engine.range_check(0.0, math.inf, lambda lo, hi: f"{name}: psi='kl' needs non-negative utilities; "
                                                               f"got min {lo:g}")
    return _engine.pointwise_kernel(_engine.PT_BREG_KL_EXP, utilities=u[0], checks=u[1], v_checks=(nonneg,))


SPECS = [
    LossSpec("listnet", listnet_loss, "listwise", True, None,
             lambda m, temperature=1.0: 2.0 / temperature, lambda m, temperature=1.0: math.sqrt(2.0) / temperature,
             {"temperature": 1.0}, "Cao et al. ICML 2007; Chaudhuri & Tewari 2015, Prop. 1",
             "constants independent of m (tight as m grows); NDCG-consistency depends on the target "
             "distribution (Ravikumar et al. 2011)", hessian_diag=_listnet_hessian,
             kernel=lambda h: _engine.listnet_kernel(check_positive(h.get("temperature", 1.0), "temperature",
                                                                    "listnet")), labels_affine=never),
    LossSpec("listmle", listmle_loss, "listwise", True, None,
             lambda m: 2.0 * max(m - 1, 0), lambda m: math.sqrt(2.0) * max(m - 1, 0), {},
             "Xia et al. ICML 2008", "label ties broken by input order; the gradient ℓ1 norm is < 2 per suffix term",
             hessian_diag=_listmle_hessian, quadratic=lambda h: True, kernel=lambda h: _engine.listmle_kernel(),
             labels_affine=never),
    LossSpec("smooth_dcg", smooth_dcg_loss, "listwise", False, None, None, None,
             {"k": 10, "sigma": 1.0, "gain": "exp2"}, "Chapelle & Wu, Information Retrieval 13, 2010",
             "d(j) from the current ranking: kinks where scores tie", smooth_at_ties=False, hessian="abs_grad",
             valid_when=("positive_gain",), example_hyper={"k": 3}, quadratic=lambda h: True,
             kernel=_smooth_dcg_kernel, labels_affine=never),
    LossSpec("smooth_dcg1", smooth_dcg1_loss, "listwise", False, None,
             lambda m, sigma=1.0, y_max=4: (2.0 ** y_max - 1) / (2 * sigma),
             lambda m, sigma=1.0, y_max=4: (2.0 ** y_max - 1) / (2 * sigma),
             {"sigma": 1.0, "gain": "exp2"}, "Chaudhuri & Tewari ICML 2015, Prop. 2",
             "constants for labels in [0, y_max] (default 4), independent of m", hessian="abs_grad",
             kernel=_smooth_dcg1_kernel, labels_affine=affine_if_linear_gain),
    LossSpec("lambdaloss", lambdaloss_loss, "listwise", False, None, None, None,
             {"sigma": 1.0}, "Wang et al. CIKM 2018 (NDCG-Loss2++, mu=5)",
             "rank-dependent weights jump where scores cross", smooth_at_ties=False,
             valid_when=("ordered_pair", "positive_gain"), pair_form=_lambdaloss_pairs, quadratic=lambda h: True,
             kernel=_lambdaloss_kernel, step_weights=lambda h: bool(h.get("norm", False)),
             rank_weights=lambda h: (h.get("weighting", "ndcg2pp") not in ("arp1", "arp2")
                                     or h.get("truncation_level") is not None), labels_affine=never),
    LossSpec("approx_ndcg", approx_ndcg_loss, "listwise", False, None, None, None,
             {"alpha": 10.0, "gain": "exp2"}, "Qin, Liu & Li, Information Retrieval 13, 2010", "",
             hessian="abs_grad", valid_when=("positive_gain",), quadratic=lambda h: True, kernel=_approx_ndcg_kernel,
             labels_affine=never),
    LossSpec("bregman", bregman_loss, "listwise", True, True, None, None,
             {"utility": "linear", "psi": "squared", "link": "identity"},
             "Ravikumar, Tewari & Yang AISTATS 2011; " + CT + ", eq. (5)",
             "convex for (squared, identity) and (kl, exp)", separable=True, kernel=_bregman_kernel,
             regret=RegretRule("bregman", _bregman_constant,
                               lambda h: ("2/√μ = 2√‖U(Δ)‖∞ (ψ = KL)" if h.get("psi", "squared") == "kl"
                                          else "2/√μ = 2 (ψ = ½‖·‖²)"),
                               needs_u=lambda h: h.get("psi", "squared") == "kl", bound_params=("mu",),
                               check=_bregman_check), labels_affine=affine_if_linear_utility),
]
