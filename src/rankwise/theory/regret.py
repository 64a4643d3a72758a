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

References
----------
C. Calauzènes, N. Usunier, P. Gallinari. "Calibration and regret bounds for order-preserving
surrogate losses in learning to rank." Machine Learning 93(2-3):227-260, 2013. Lemma 5.1,
eq. (9)-(10), Theorems 5.2 (pointwise), 5.3 (Bregman), 5.4 (pairwise), Table 2.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from rankwise.errors import InputError
from rankwise.theory.gppm import GPPM, get_measure
from rankwise.theory.inner import (
    Distribution, best_performance, expected_utility, inner_performance, make_inner_risk,
    minimize_inner_risk,
)

__all__ = ["c_phi", "regret_constant", "RegretBound", "regret_bound", "TABLE2"]


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


# name -> (family, constant(hyper, U) -> c)
def _eta(h):
    if "eta" not in h:
        raise InputError("this regret constant needs the template's eta (pass eta=...)")
    return float(h["eta"])


TABLE2 = {
    "pointwise_squared": ("pointwise", lambda h, U: math.sqrt(2.0)),
    "pointwise_logistic": ("pointwise", lambda h, U: math.sqrt(_eta(h))),
    "pointwise_exponential": ("pointwise", lambda h, U: math.sqrt(_eta(h))),
    "pointwise_squared_hinge": ("pointwise", lambda h, U: math.sqrt(2.0 * _eta(h)) / float(h.get("t", 1.0))),
    "pointwise_smooth_hinge": ("pointwise", lambda h, U: 4.0 * math.sqrt(_eta(h) / float(h.get("alpha", 0.25)))),
    "pairwise_squared": ("pairwise", lambda h, U: 1.0),
    "op_pairwise_logistic": ("pairwise", lambda h, U: 2.0 * math.sqrt(float(np.max(np.abs(U))))),
    "op_pairwise_exponential": ("pairwise", lambda h, U: 2.0 * math.sqrt(float(np.max(np.abs(U))))),
    "bregman": ("bregman", lambda h, U: 2.0 / math.sqrt(float(h.get("mu", 1.0)))),
}


def _table_key(loss: str, hyper: dict) -> str:
    if loss == "op_pairwise":
        phi = hyper.get("phi", hyper.get("link", "logistic"))
        key = f"op_pairwise_{phi}"
        if key not in TABLE2:
            raise InputError(f"op_pairwise with phi={phi!r} has no Table 2 constant; "
                             "Table 2 covers phi='logistic' and phi='exponential'")
        return key
    if loss not in TABLE2:
        raise InputError(f"no Table 2 regret constant for loss {loss!r}; known: "
                         f"{', '.join(sorted(set(TABLE2) - {'op_pairwise_logistic', 'op_pairwise_exponential'}) + ['op_pairwise'])}")
    return loss


def regret_constant(loss: str, *, U=None, **hyper) -> float:
    """The constant ``c`` of Table 2 for a registry loss name (``U`` = U(Δ) for the pairwise ones)."""
    fam, fn = TABLE2[_table_key(loss, hyper)]
    if fam == "pairwise" and loss != "pairwise_squared" and U is None:
        raise InputError(f"the constant of {loss!r} depends on U(Δ): pass U=expected_utility(metric, Δ)")
    return float(fn(hyper, U))


@dataclass
class RegretBound:
    """``R̄(Δ) − R(Δ, s) ≤ c · C_φ(p) · (L(Δ, s) − L̲(Δ))^{1/q}`` for one loss and one GPPM.

    Call :meth:`bound` with a surrogate regret (and ``U`` for the pairwise logistic/exponential
    constants), or :meth:`check` with a distribution and a score vector to get the metric regret,
    the surrogate regret and the bound side by side.
    """

    loss: str
    metric: str
    family: str
    p: float
    q: float
    hyper: dict = field(default_factory=dict)
    _measure: object = None

    def constant(self, U=None) -> float:
        return regret_constant(self.loss, U=U, **self.hyper)

    def c_phi(self, n: int) -> float:
        return c_phi(self._measure.discount(n), self.p)

    def bound(self, surrogate_regret: float, n: int, U=None) -> float:
        if surrogate_regret < 0:
            surrogate_regret = 0.0
        return self.constant(U) * self.c_phi(n) * surrogate_regret ** (1.0 / self.q)

    def check(self, dist: Distribution, s, *, loss_fn=None, l_min: float | None = None) -> dict:
        """Metric regret, surrogate regret and bound at ``(Δ, s)``.

        The u-instance is evaluated by handing ``u(y)`` to the loss with ``utility="linear"``.
        ``l_min`` (the infimum ``L̲(Δ)``) is computed by L-BFGS when not given.
        """
        m = self._measure
        targets = np.stack([m.utility(y) for y in dist.labels])
        hyper = dict(self.hyper)
        hyper["utility"] = "linear"
        risk = make_inner_risk(self.loss if loss_fn is None else loss_fn, dist, targets=targets,
                               convex=True, **hyper)
        if l_min is None:
            _, l_min = minimize_inner_risk(risk)
        s = np.asarray(s, dtype=np.float64)
        sur = risk.value(s) - l_min
        rbar, _ = best_performance(m, dist)
        reg = rbar - inner_performance(m, dist, s)
        U = expected_utility(m, dist)
        return {"metric_regret": reg, "surrogate_regret": sur, "l_min": l_min,
                "bound": self.bound(max(sur, 0.0), dist.n_items, U), "U": U}

    def __str__(self) -> str:
        c = {"pointwise_logistic": "√η", "pointwise_exponential": "√η"}.get(self.loss)
        return (f"R̄ − R ≤ c · C_φ({self.p:g}) · (L − L̲)^(1/{self.q:g})  for {self.loss} ({self.family}) "
                f"vs {self.metric}" + (f", c = {c}" if c else ""))


def regret_bound(loss: str, metric, **hyper) -> RegretBound:
    """The Table 2 surrogate regret bound of ``loss`` (registry name) for a GPPM ``metric``.

    Parameters
    ----------
    loss : str
        ``pointwise_squared``, ``pointwise_logistic``, ``pointwise_exponential``,
        ``pointwise_squared_hinge``, ``pointwise_smooth_hinge``, ``pairwise_squared``,
        ``op_pairwise`` (``phi="logistic"`` or ``"exponential"``) or ``bregman`` (``mu``).
    metric : str or GPPM
        A GPPM (DCG, NDCG, P@k, R@k, AUC, Spearman). ERR and AP are refused: no bound exists
        since no order-preserving loss is calibrated with them (Theorem 3.3).
    **hyper
        The template's hyper-parameters (``eta``, ``t``, ``alpha``, ``mu``, ``phi``).

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
    key = _table_key(loss, hyper)
    return RegretBound(loss, m.name, TABLE2[key][0], 2.0, 2.0, dict(hyper), m)
