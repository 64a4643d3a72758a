"""Surrogate regret bounds for order-preserving template losses (Calauzènes et al. 2013, Sect. 5).

For a (u, φ)-GPPM and the u-instance of a template loss of Table 2, for every Δ and s:

.. math::

    \\overline{R}(\\Delta) - R(\\Delta, s) \\le c\\, C_\\phi(p)\\,
        \\bigl(L^u(\\Delta, s) - \\underline{L^u}(\\Delta)\\bigr)^{1/q},
    \\qquad
    C_\\phi(p) = \\Bigl(\\sum_{i=1}^{\\lfloor n/2 \\rfloor} \\bigl(\\phi(i) - \\phi(n-i+1)\\bigr)^p\\Bigr)^{1/p},

with ``1/p + 1/q = 1`` and, for every loss of Table 2, ``q = p = 2`` (eq. (9) and eq. (10)). The
inner bound integrates to the bound on the risks (Steinwart 2007, Theorems 3.2 and 2.13).

Table 2 constants ``c`` (η > max_i U_i(Δ) is the template's upper bound on utilities):

==========================  ==========================================  ======================
family                      λ                                           c
==========================  ==========================================  ======================
pointwise squared           (v_i − s_i)²                                √2
pointwise logistic          v_i log(1+e^{−s_i}) + (η−v_i) log(1+e^{s_i})  √η
pointwise exponential       v_i e^{−s_i} + (η−v_i) e^{s_i}              √η
pointwise squared hinge     v_i max(0, t−s_i)² + (η−v_i) max(0, s_i)²   √(2η) / t
pointwise smooth hinge      v_i φ_α(1−s_i) + (η−v_i) φ_α(s_i)           4 √(η/α)
pairwise squared (i<j)      (s_i − s_j − v_i + v_j)²                    1
pairwise logistic (i<j)     v_i log(1+e^{−d_ij}) + v_j log(1+e^{d_ij})   2 √‖U(Δ)‖_∞
pairwise exponential (i<j)  v_i e^{−d_ij} + v_j e^{d_ij}                2 √‖U(Δ)‖_∞
Bregman B_ψ(v ‖ g(s))       ψ μ-strongly convex                         2 / √μ
==========================  ==========================================  ======================

μ for the two ψ the ``bregman`` loss offers (Theorem 5.3 and its proof):

- ``psi="squared"``, ψ(x) = ½‖x‖²: Hessian I, so μ = 1 on all of R^n (any link): c = 2.
- ``psi="kl"`` (with ``link="exp"``), ψ(x) = Σ x_i log x_i − x_i: ψ'' = 1/x, so ψ is *not*
  strongly convex on Γ = g(R^n) = (0, ∞)^n, which Theorem 5.3 assumes. Its proof still goes
  through with μ = 1/‖U(Δ)‖_∞: the surrogate regret is B_ψ(U(Δ) ‖ g(s)) (Banerjee et al. 2005),
  and ψ is separable, so its infimum over the cone S_u(C_s) used in the proof is reached at
  g_i = g_j = (U_i + U_j)/2 on each constrained pair and g_k = U_k elsewhere, i.e. inside
  [0, ‖U(Δ)‖_∞]^n, where ψ is (1/‖U(Δ)‖_∞)-strongly convex. Hence
  c = 2 √‖U(Δ)‖_∞, a Δ-dependent constant like the pairwise logistic/exponential ones.

A user ``mu`` is accepted only if it does not exceed this modulus (a smaller μ gives a larger,
still valid constant); a larger one would make the bound invalid and is refused.

References
----------
C. Calauzènes, N. Usunier, P. Gallinari. "Calibration and regret bounds for order-preserving
surrogate losses in learning to rank." Machine Learning 93(2-3):227-260, 2013. Lemma 5.1,
eq. (9)-(10), Theorems 5.2 (pointwise), 5.3 (Bregman), 5.4 (pairwise), Table 2.
A. Banerjee, X. Guo, H. Wang. "On the optimality of conditional expectation as a Bregman
predictor." IEEE Transactions on Information Theory 51(7):2664-2669, 2005.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from rankwise.errors import InputError
from rankwise.theory.gppm import GPPM, get_measure
from rankwise.theory.inner import (
    Distribution, best_performance, expected_utility, make_inner_risk, minimize_inner_risk,
)

from rankwise.losses.listwise import bregman_modulus  # noqa: E402  (the Bregman loss's own rule)

__all__ = ["c_phi", "regret_constant", "RegretBound", "regret_bound", "table2", "BOUND_PARAMS", "bregman_modulus"]


def c_phi(phi, p: float = 2.0) -> float:
    """``C_φ(p) = (Σ_{i=1}^{⌊n/2⌋} (φ(i) − φ(n−i+1))^p)^{1/p}`` (eq. (10)); ``p = inf`` gives the max.

    ``phi`` is the discount vector ``(φ(1), ..., φ(n))`` or a :class:`GPPM` with ``n`` given by a
    tuple ``(gppm, n)``.
    """
    if isinstance(phi, tuple) and len(phi) == 2 and isinstance(phi[0], GPPM):
        phi = phi[0].discount(int(phi[1]))
    phi = np.asarray(phi, dtype=np.float64)
    if phi.ndim != 1 or phi.size < 1 or not np.all(np.isfinite(phi)):
        raise InputError(f"phi must be a finite 1-d discount vector; got shape {phi.shape}")
    if np.any(np.diff(phi) > 1e-12) or np.any(phi < 0):
        raise InputError("phi must be non-negative and non-increasing (a GPPM discount)")
    if not (p == math.inf or p >= 1):
        raise InputError(f"p must be ≥ 1 or inf; got {p!r}")
    n = len(phi)
    h = n // 2
    diffs = phi[:h] - phi[::-1][:h]
    if h == 0:
        return 0.0
    if p == math.inf:
        return float(diffs.max())
    return float(np.sum(diffs ** p) ** (1.0 / p))


# Parameters of the *bound* (not of the loss): they never reach the loss function.
BOUND_PARAMS = ("mu",)

def _rule(loss: str, hyper: dict):
    """The loss's Table 2 :class:`~rankwise.losses.RegretRule` (declared in its spec), checked
    against ``hyper`` (loss and bound parameters)."""
    from rankwise import losses as _losses

    sp = _losses.spec(loss) if isinstance(loss, str) and loss in _losses.REGISTRY else None
    if sp is None or sp.regret is None:
        known = sorted(n for n in _losses.REGISTRY if _losses.spec(n).regret is not None)
        raise InputError(f"no Table 2 regret constant for loss {loss!r}; known: {', '.join(known)}")
    rule = sp.regret
    if rule.check is not None:
        rule.check({k: v for k, v in hyper.items() if k not in rule.bound_params},
                   {k: v for k, v in hyper.items() if k in rule.bound_params})
    return rule


def table2() -> dict:
    """``{loss name: (family, constant(hyper, U) -> c)}`` for every registered loss with a
    Table 2 constant (read from the loss specs)."""
    from rankwise import losses as _losses

    return {n: (_losses.spec(n).regret.family, _losses.spec(n).regret.constant)
            for n in sorted(_losses.REGISTRY) if _losses.spec(n).regret is not None}


def regret_constant(loss: str, *, U=None, **hyper) -> float:
    """The constant ``c`` of Table 2 for a registry loss name.

    ``U`` = U(Δ) is needed by the constants that depend on the distribution (pairwise logistic and
    exponential: ``2√‖U‖_∞``; Bregman with ``psi="kl"``: ``2/√μ`` with ``μ = 1/‖U‖_∞``).
    """
    rule = _rule(loss, hyper)
    if rule.needs_u(hyper) and U is None:
        raise InputError(f"the constant of {loss!r} depends on U(Δ): pass U=expected_utility(metric, Δ)")
    return float(rule.constant(hyper, U))


def _split_hyper(loss: str, hyper: dict) -> tuple[dict, dict]:
    """``(loss_hyper, bound_hyper)``: the loss's own keyword arguments and the bound's (``mu``)."""
    import inspect

    bound = {k: v for k, v in hyper.items() if k in BOUND_PARAMS}
    lossh = {k: v for k, v in hyper.items() if k not in BOUND_PARAMS}
    if "utility" in lossh:
        raise InputError("regret_bound takes no utility=: the bound is for the u-instance of the metric, "
                         "so the loss receives v = u(y) (utility='linear') from the metric's utility")
    from rankwise import losses as _losses

    fn = _losses.get(loss)
    params = inspect.signature(fn).parameters
    accepted = [n for n, p in params.items()
                if p.kind == p.KEYWORD_ONLY and n not in ("where", "weights", "reduction", "utility")]
    unknown = sorted(set(lossh) - set(accepted))
    if unknown:
        raise InputError(f"regret_bound({loss!r}): unknown hyper-parameter(s) {unknown}; the loss takes "
                         f"{accepted} and the bound takes {list(BOUND_PARAMS)}")
    rule = _rule(loss, lossh)
    extra = sorted(set(bound) - set(rule.bound_params))
    if extra:
        raise InputError(f"mu is the strong-convexity modulus of the Bregman bound; {loss!r} takes no {extra[0]}")
    if rule.check is not None:
        rule.check(lossh, bound)
    return lossh, bound


@dataclass
class RegretBound:
    """``R̄(Δ) − R(Δ, s) ≤ c · C_φ(p) · (L(Δ, s) − L̲(Δ))^{1/q}`` for one loss and one GPPM.

    Call :meth:`bound` with a surrogate regret (and ``U`` for the constants that depend on
    U(Δ)), or :meth:`check` / :meth:`check_batch` with a distribution and score vector(s) to get
    the metric regret, the surrogate regret and the bound side by side.

    ``hyper`` holds the loss's hyper-parameters (handed to the loss), ``bound_hyper`` the bound's
    own (``mu``; never handed to the loss).
    """

    loss: str
    metric: str
    family: str
    p: float
    q: float
    hyper: dict = field(default_factory=dict)
    _measure: object = None
    bound_hyper: dict = field(default_factory=dict)

    def constant(self, U=None) -> float:
        return regret_constant(self.loss, U=U, **self.hyper, **self.bound_hyper)

    def c_phi(self, n: int) -> float:
        return c_phi(self._measure.discount(n), self.p)

    def bound(self, surrogate_regret: float, n: int, U=None) -> float:
        if surrogate_regret < 0:
            surrogate_regret = 0.0
        return self.constant(U) * self.c_phi(n) * surrogate_regret ** (1.0 / self.q)

    def _risk(self, dist: Distribution, loss_fn):
        m = self._measure
        targets = np.stack([m.utility(y) for y in dist.labels])
        hyper = dict(self.hyper)
        hyper["utility"] = "linear"
        return make_inner_risk(self.loss if loss_fn is None else loss_fn, dist, targets=targets,
                               convex=True, **hyper)

    def check_batch(self, dist: Distribution, S, *, loss_fn=None, l_min: float | None = None) -> dict:
        """:meth:`check` for a batch of score vectors ``S`` (B, n): one loss call for all of them.

        Evaluates both sides of eq. (9) of Calauzènes et al. (2013) at each ``s_b``: the metric
        regret ``R̄(Δ) − R(Δ, s_b)`` (exact under ties: expected discounts over random
        tie-breaking) and ``c · C_φ(2) · (L(Δ, s_b) − L̲(Δ))^{1/2}``.

        Returns arrays ``metric_regret``, ``surrogate_regret``, ``bound`` (shape (B,)) and the
        scalars ``l_min``, ``U``, ``constant``, ``c_phi``.
        """
        S = np.asarray(S, dtype=np.float64)
        if S.ndim != 2 or S.shape[1] != dist.n_items or not np.all(np.isfinite(S)):
            raise InputError(f"S must be a finite (B, {dist.n_items}) array of score vectors; got shape {S.shape}")
        m = self._measure
        risk = self._risk(dist, loss_fn)
        if l_min is None:
            _, l_min = minimize_inner_risk(risk)
        sur = risk.values(S) - float(l_min)
        U = expected_utility(m, dist)
        rbar, _ = best_performance(m, dist)
        offset = float(dist.probs @ np.array([m.offset(y) for y in dist.labels]))
        # R(Δ, s) = E[b] + Σ_i w_i(s) U_i with w the expected discount under random tie-breaking
        perf = offset + np.array([m.position_weights(s) @ U for s in S])
        c = self.constant(U)
        cp = self.c_phi(dist.n_items)
        return {"metric_regret": rbar - perf, "surrogate_regret": sur, "l_min": float(l_min),
                "bound": c * cp * np.maximum(sur, 0.0) ** (1.0 / self.q), "U": U, "constant": c, "c_phi": cp}

    def check(self, dist: Distribution, s, *, loss_fn=None, l_min: float | None = None) -> dict:
        """Metric regret, surrogate regret and bound at ``(Δ, s)``.

        The u-instance is evaluated by handing ``u(y)`` to the loss with ``utility="linear"``
        (and only the loss's hyper-parameters; ``mu`` stays with the bound). ``l_min`` (the
        infimum ``L̲(Δ)``) is computed by L-BFGS when not given.
        """
        s = np.asarray(s, dtype=np.float64)
        if s.shape != (dist.n_items,):
            raise InputError(f"s must have shape ({dist.n_items},); got {s.shape}")
        r = self.check_batch(dist, s[None, :], loss_fn=loss_fn, l_min=l_min)
        return {"metric_regret": float(r["metric_regret"][0]), "surrogate_regret": float(r["surrogate_regret"][0]),
                "l_min": r["l_min"], "bound": float(r["bound"][0]), "U": r["U"]}

    def __str__(self) -> str:
        c = _rule(self.loss, self.hyper).symbol(self.hyper)
        return (f"R̄ − R ≤ c · C_φ({self.p:g}) · (L − L̲)^(1/{self.q:g})  for {self.loss} ({self.family}) "
                f"vs {self.metric}" + (f", c = {c}" if c else ""))


def regret_bound(loss: str, metric, **hyper) -> RegretBound:
    """The Table 2 surrogate regret bound of ``loss`` (registry name) for a GPPM ``metric``.

    .. math:: \\overline R(\\Delta) - R(\\Delta, s) \\le c\\, C_\\phi(2)\\, \\sqrt{L^u(\\Delta, s) - \\underline{L^u}(\\Delta)}

    Parameters
    ----------
    loss : str
        ``pointwise_squared``, ``pointwise_logistic``, ``pointwise_exponential``,
        ``pointwise_squared_hinge``, ``pointwise_smooth_hinge``, ``pairwise_squared``,
        ``op_pairwise`` (``phi="logistic"`` or ``"exponential"``) or ``bregman`` (``psi``,
        ``link``; optional ``mu``).
    metric : str or GPPM
        A GPPM (DCG, NDCG, P@k, R@k, AUC, Spearman). ERR and AP are refused: no bound exists
        since no order-preserving loss is calibrated with them (Theorem 3.3).
    **hyper
        The loss's hyper-parameters (``eta``, ``t``, ``alpha``, ``phi``, ``psi``, ``link``),
        handed to the loss by :meth:`RegretBound.check`, and the bound's own parameter ``mu``
        (Bregman: a strong-convexity modulus of ψ, at most the one derived for ``psi``; default
        the derived one), which is not handed to the loss. ``utility`` is refused (the bound is
        for the u-instance of the metric).

    Notes
    -----
    Assumptions (Calauzènes et al. 2013, Sect. 5): a (u, φ)-GPPM; the u-instance of the template
    (the loss receives v = u(y)); pointwise templates need 0 ≤ u ≤ η; Theorem 5.3 needs ψ
    μ-strongly convex where its proof uses it (see the module docstring for ``psi="kl"``);
    Theorem 5.4 needs the inner risk's infimum over score differences to be reached by a score
    vector, which holds for the pairwise templates of Table 2.

    References
    ----------
    Calauzènes, Usunier & Gallinari (2013), eq. (9), Theorems 5.2-5.4, Table 2 (p = q = 2).
    """
    m = get_measure(metric)
    if not isinstance(m, GPPM):
        raise InputError(f"regret_bound needs a GPPM metric; {m.name!r} is not one, and by Theorem 3.3 "
                         "no order-preserving loss is calibrated with ERR or AP, so no bound exists")
    if not isinstance(loss, str):
        raise InputError("regret_bound takes a registry loss name (the constant c depends on the family)")
    rule = _rule(loss, hyper)
    lossh, boundh = _split_hyper(loss, hyper)
    return RegretBound(loss, m.name, rule.family, 2.0, 2.0, lossh, m, boundh)
