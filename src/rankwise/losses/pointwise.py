"""Pointwise template losses: one term per item, summed over the real items of a list.

The templates of Calauzènes, Usunier & Gallinari (2013, Table 2) act on utilities
``v_i = u(y_i)`` (``utility="linear"``: v = y, ``"exp2"``: v = 2^y - 1, or a callable). Item
weights multiply each item's term; per-list weights multiply the list's sum. A list's value is
the (weighted) *sum* over its items, the form whose ℓ∞/ℓ2 Lipschitz constants and regret
constants the papers state.

References
----------
C. Calauzènes, N. Usunier, P. Gallinari. "Calibration and regret bounds for order-preserving
surrogate losses in learning to rank." Machine Learning 93(2-3):227-260, 2013. Table 2.
D. Cossock, T. Zhang. "Statistical analysis of Bayes optimal subset ranking." IEEE Trans.
Information Theory 54(11), 2008.
"""
from __future__ import annotations

import math

from rankwise.errors import InputError
from rankwise.losses import _engine
from rankwise.losses._deferred import deferred
from rankwise.losses._spec import CT, LossSpec, affine_if_linear_utility, always, pointwise_regret, positive_param
from rankwise.losses._utils import check_positive, prepare, reduce, safe_exp, utility

torch = deferred("torch", globals())
F = deferred("torch.nn.functional", globals(), "F")


def _finish(term, b, reduction, name):
    if b.item_w is not None:
        term = term * b.item_w
    term = torch.where(b.mask, term, torch.zeros_like(term))
    return reduce(term.sum(-1), b.mask.any(-1), b, reduction, loss=name)


def _utility_eta(b, u, eta, name):
    v = utility(b.labels, u, loss=name)
    eta = check_positive(eta, "eta", name)
    vv = torch.where(b.mask, v, torch.zeros_like(v))
    if bool((vv < 0).any()) or bool((vv > eta).any()):
        raise InputError(f"{name}: utilities u(y) must lie in [0, eta] = [0, {eta:g}]; got range "
                         f"[{float(vv.min()):g}, {float(vv.max()):g}]. Pass eta >= the largest "
                         "utility (e.g. eta=4 for labels 0..4 with utility='linear')")
    return vv, eta


def pointwise_squared_loss(scores, labels, *, where=None, weights=None, reduction="mean",
                           utility="linear"):
    r"""Squared error on the utility (regression on u(y)).

    .. math:: \ell(\mathbf v, \mathbf s) = \sum_i (v_i - s_i)^2, \qquad v_i = u(y_i)

    Convex and order-preserving (the minimiser of the inner risk is E[v]); with
    ``utility="exp2"`` this is the regression on 2^y - 1 of Cossock & Zhang (2008).

    References
    ----------
    Calauzènes, Usunier & Gallinari (2013), Table 2, "Squared Error".
    """
    return _squared(scores, labels, where, weights, reduction, utility, "pointwise_squared")


def _squared(scores, labels, where, weights, reduction, u, name):
    b = prepare(scores, labels, where, weights, loss=name)
    v = _utility(b, u, name)
    return _finish((v - b.scores) ** 2, b, reduction, name)


def pointwise_utility_regression_loss(scores, labels, *, where=None, weights=None,
                                      reduction="mean", utility="exp2"):
    r"""Regression on the DCG gain: :func:`pointwise_squared_loss` with ``utility="exp2"``.

    .. math:: \ell = \sum_i (2^{y_i} - 1 - s_i)^2

    References
    ----------
    Cossock & Zhang (2008); Calauzènes et al. (2013), Table 2.
    """
    return _squared(scores, labels, where, weights, reduction, utility, "pointwise_utility_regression")


def _utility(b, u, name):
    return utility(b.labels, u, loss=name)


def pointwise_logistic_loss(scores, labels, *, where=None, weights=None, reduction="mean",
                            utility="linear", eta=1.0):
    r"""Pointwise logistic template.

    .. math:: \ell = \sum_i v_i \log(1 + e^{-s_i}) + (\eta - v_i)\log(1 + e^{s_i})

    Requires ``0 <= v_i <= eta`` (checked). Convex, order-preserving; computed with
    ``softplus`` so it stays finite for any finite score.

    References
    ----------
    Calauzènes, Usunier & Gallinari (2013), Table 2, "Logistic".
    """
    name = "pointwise_logistic"
    b = prepare(scores, labels, where, weights, loss=name)
    v, eta = _utility_eta(b, utility, eta, name)
    s = b.scores
    return _finish(v * F.softplus(-s) + (eta - v) * F.softplus(s), b, reduction, name)


def pointwise_exponential_loss(scores, labels, *, where=None, weights=None, reduction="mean",
                               utility="linear", eta=1.0):
    r"""Pointwise exponential template.

    .. math:: \ell = \sum_i v_i e^{-s_i} + (\eta - v_i) e^{s_i}

    Notes
    -----
    The exponential is continued linearly beyond an argument of 50 (value and slope match;
    convexity kept) so that the value stays finite for scores up to 1e4.

    References
    ----------
    Calauzènes, Usunier & Gallinari (2013), Table 2, "Exponential".
    """
    name = "pointwise_exponential"
    b = prepare(scores, labels, where, weights, loss=name)
    v, eta = _utility_eta(b, utility, eta, name)
    s = b.scores
    return _finish(v * safe_exp(-s) + (eta - v) * safe_exp(s), b, reduction, name)


def pointwise_squared_hinge_loss(scores, labels, *, where=None, weights=None, reduction="mean",
                                 utility="linear", eta=1.0, t=1.0):
    r"""Pointwise squared-hinge template.

    .. math:: \ell = \sum_i v_i \max(0, t - s_i)^2 + (\eta - v_i)\max(0, s_i)^2

    References
    ----------
    Calauzènes, Usunier & Gallinari (2013), Table 2, "Square Hinge".
    """
    name = "pointwise_squared_hinge"
    b = prepare(scores, labels, where, weights, loss=name)
    v, eta = _utility_eta(b, utility, eta, name)
    t = check_positive(t, "t", name)
    s = b.scores
    return _finish(v * torch.relu(t - s) ** 2 + (eta - v) * torch.relu(s) ** 2, b, reduction, name)


def smooth_hinge(x: torch.Tensor, alpha: float) -> torch.Tensor:
    r"""φ_α(x) = 0 (x <= 0), x²/(2α) (0 <= x <= α), x - α/2 (x >= α)."""
    xc = x.clamp(min=0.0, max=alpha)
    return xc ** 2 / (2 * alpha) + torch.relu(x - alpha)


def pointwise_smooth_hinge_loss(scores, labels, *, where=None, weights=None, reduction="mean",
                                utility="linear", eta=1.0, alpha=0.25):
    r"""Pointwise differentiable-hinge template.

    .. math:: \ell = \sum_i v_i \varphi_\alpha(1 - s_i) + (\eta - v_i)\varphi_\alpha(s_i),
       \quad \varphi_\alpha(x) = \begin{cases} 0 & x \le 0 \\ x^2/(2\alpha) & 0 \le x \le \alpha
       \\ x - \alpha/2 & x \ge \alpha \end{cases}

    ``alpha`` must lie in (0, eta/2) as in the paper (checked).

    References
    ----------
    Calauzènes, Usunier & Gallinari (2013), Table 2, "Differentiable Hinge".
    """
    name = "pointwise_smooth_hinge"
    b = prepare(scores, labels, where, weights, loss=name)
    v, eta = _utility_eta(b, utility, eta, name)
    alpha = check_positive(alpha, "alpha", name)
    if not alpha < eta / 2:
        raise InputError(f"{name}: alpha must lie in (0, eta/2) = (0, {eta / 2:g}); got {alpha:g}")
    s = b.scores
    term = v * smooth_hinge(1 - s, alpha) + (eta - v) * smooth_hinge(s, alpha)
    return _finish(term, b, reduction, name)


def sigmoid_ce_loss(scores, labels, *, where=None, weights=None, reduction="mean"):
    r"""Sigmoid cross-entropy for binary (or [0, 1]-valued) labels.

    .. math:: \ell = \sum_i y_i \log(1 + e^{-s_i}) + (1 - y_i)\log(1 + e^{s_i})

    This is the logistic template with η = 1 and the linear utility; labels outside [0, 1]
    are rejected.

    References
    ----------
    Calauzènes, Usunier & Gallinari (2013), Table 2 (η = 1); Kotłowski, Dembczyński,
    Hüllermeier, "Bipartite ranking through minimization of univariate loss", ICML 2011.
    """
    name = "sigmoid_ce"
    b = prepare(scores, labels, where, weights, loss=name)
    y = b.labels
    if bool((y < 0).any()) or bool((y > 1).any()):
        raise InputError(f"{name}: labels must lie in [0, 1] (binary relevance); got range "
                         f"[{float(y.min()):g}, {float(y.max()):g}]. Binarise them or use "
                         "pointwise_logistic with eta >= the largest label")
    s = b.scores
    return _finish(y * F.softplus(-s) + (1 - y) * F.softplus(s), b, reduction, name)


# ------------------------------------------------------------------------------------ registry


def _eta_message(name, eta):
    return lambda lo, hi: (f"{name}: utilities u(y) must lie in [0, eta] = [0, {eta:g}]; got range [{lo:g}, {hi:g}]. "
                           "Pass eta >= the largest utility (e.g. eta=4 for labels 0..4 with utility='linear')")


def _kernel(kind, name, default_utility="linear", template=True):
    """``hyper -> EngineKernel`` of a pointwise template (None for a callable utility)."""
    def make(h):
        u = _engine.utilities(h.get("utility", default_utility), name)
        if u is None:
            return None
        v, checks = u
        eta = check_positive(h.get("eta", 1.0), "eta", name) if template else 1.0
        t = check_positive(h.get("t", 1.0), "t", name)
        alpha = check_positive(h.get("alpha", 0.25), "alpha", name)
        if kind == _engine.PT_SMOOTHHINGE and not alpha < eta / 2:
            raise InputError(f"{name}: alpha must lie in (0, eta/2) = (0, {eta / 2:g}); got {alpha:g}")
        v_checks = (_engine.range_check(0.0, eta, _eta_message(name, eta)),) if template else ()
        return _engine.pointwise_kernel(kind, eta=eta, t=t, alpha=alpha, utilities=v, checks=checks,
                                        v_checks=v_checks)
    return make


def _sigmoid_ce_kernel(h):
    name = "sigmoid_ce"
    check = _engine.range_check(0.0, 1.0, lambda lo, hi: (
        f"{name}: labels must lie in [0, 1] (binary relevance); got range [{lo:g}, {hi:g}]. Binarise them or use "
        "pointwise_logistic with eta >= the largest label"))
    return _engine.pointwise_kernel(_engine.PT_LOGISTIC, eta=1.0, v_checks=(check,))

def _sqrt_eta(h):
    return math.sqrt(positive_param(h, "eta"))


SPECS = [
    LossSpec("pointwise_squared", pointwise_squared_loss, "pointwise", True, True, None, None,
             {"utility": "linear"}, CT + "; Cossock & Zhang 2008",
             "unbounded gradient: no Lipschitz constant; Hessian 2 exactly", separable=True, kernel=_kernel(_engine.PT_SQUARED, "pointwise_squared", template=False),
             regret=pointwise_regret(lambda h: math.sqrt(2.0), "√2"), labels_affine=affine_if_linear_utility),
    LossSpec("pointwise_utility_regression", pointwise_utility_regression_loss, "pointwise",
             True, True, None, None, {"utility": "exp2"}, "Cossock & Zhang 2008",
             "regression on 2^y - 1: order-preserving w.r.t. the DCG utility", separable=True, kernel=_kernel(_engine.PT_SQUARED, "pointwise_utility_regression", "exp2", template=False),
             labels_affine=affine_if_linear_utility),
    LossSpec("pointwise_logistic", pointwise_logistic_loss, "pointwise", True, True,
             lambda m, eta=1.0: m * eta, lambda m, eta=1.0: math.sqrt(m) * eta,
             {"utility": "linear", "eta": 1.0}, CT, "|∂ℓ/∂s_i| <= max(v, η - v) <= η: tight (v = 0, s -> ∞)",
             separable=True, kernel=_kernel(_engine.PT_LOGISTIC, "pointwise_logistic"), example_hyper={"eta": 2.0}, regret=pointwise_regret(_sqrt_eta, "√η"),
             labels_affine=affine_if_linear_utility),
    LossSpec("pointwise_exponential", pointwise_exponential_loss, "pointwise", True, True,
             None, None, {"utility": "linear", "eta": 1.0}, CT, "exp continued linearly above 50",
             separable=True, kernel=_kernel(_engine.PT_EXP, "pointwise_exponential"), example_hyper={"eta": 2.0}, regret=pointwise_regret(_sqrt_eta, "√η"),
             labels_affine=affine_if_linear_utility),
    LossSpec("pointwise_squared_hinge", pointwise_squared_hinge_loss, "pointwise", True, True,
             None, None, {"utility": "linear", "eta": 1.0, "t": 1.0}, CT, "unbounded gradient",
             separable=True, kernel=_kernel(_engine.PT_SQHINGE, "pointwise_squared_hinge"), example_hyper={"eta": 2.0},
             regret=pointwise_regret(lambda h: math.sqrt(2.0 * positive_param(h, "eta")) / positive_param(h, "t", 1.0),
                                     "√(2η)/t"), labels_affine=affine_if_linear_utility),
    LossSpec("pointwise_smooth_hinge", pointwise_smooth_hinge_loss, "pointwise", True, True,
             lambda m, eta=1.0: m * eta, lambda m, eta=1.0: math.sqrt(m) * eta,
             {"utility": "linear", "eta": 1.0, "alpha": 0.25}, CT, "φ_α' ∈ [0, 1]: tight",
             separable=True, kernel=_kernel(_engine.PT_SMOOTHHINGE, "pointwise_smooth_hinge"), example_hyper={"eta": 2.0, "alpha": 0.5},
             regret=pointwise_regret(lambda h: 4.0 * math.sqrt(positive_param(h, "eta") / positive_param(h, "alpha", 0.25)),
                                     "4√(η/α)"), labels_affine=affine_if_linear_utility),
    LossSpec("sigmoid_ce", sigmoid_ce_loss, "pointwise", True, True,
             lambda m: float(m), lambda m: math.sqrt(m), {},
             "Kotłowski et al. ICML 2011; " + CT + " (η = 1)", "binary labels in [0, 1]; tight",
             separable=True, kernel=_sigmoid_ce_kernel, binary_labels=True, labels_affine=always),
]
