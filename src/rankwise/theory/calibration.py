"""Calibration checker: does minimising a surrogate's inner risk maximise a metric?

A scoring loss ℓ is r-calibrated on a set Δ of distributions over the supervision space
(Calauzènes, Usunier & Gallinari 2013, Definition 2.3; Steinwart 2007) if for every ε > 0 and
Δ ∈ Δ there is δ > 0 with

.. math::

    L(\\Delta, s) - \\underline{L}(\\Delta) < \\delta \\;\\Rightarrow\\;
    \\overline{R}(\\Delta) - R(\\Delta, s) < \\varepsilon .

:func:`check_calibration` searches distributions Δ over a finite label space
(``{0..p}^n``) — a deterministic grid of two-point mixtures, random Dirichlet draws (dense and
sparse) and an adversarial hill-climb — and, for each, minimises the inner risk (convex losses:
L-BFGS to tolerance; non-convex: multi-start). A Δ is reported as a **counterexample** only with
a certificate: every score vector ordering the items like an optimal permutation of the metric
has inner risk at least ``L(Δ, s*) + gap`` with ``gap > 0`` (computed by minimising the inner
risk over the closed cone of each optimal permutation). Then every s with
``L(Δ, s) − L̲(Δ) < gap`` ranks strictly sub-optimally, so the loss is not calibrated at Δ.

What it can and cannot prove: a counterexample is a proof (up to floating-point accuracy of the
optimiser) of non-calibration on the searched label space; "calibrated" only means no
counterexample was found among the distributions tried. For a GPPM with a strictly decreasing
discount (DCG, NDCG without cutoff, n ≤ cutoff), calibration is equivalent to the loss being
order-preserving w.r.t. the GPPM's utility u (Theorem 3.2 and Corollary 4.5, claim 3).

Template losses (Definition 2.2) are instantiated with the metric's utility: the loss receives
``v = u(y)`` (with ``utility="linear"``), i.e. the u-instance ``ℓ^u(y, s) = ℓ(u(y), s)``. For ERR
and AP, which have no utility, binary labels are used as they are (``u(y) = y``) — Theorem 3.3
says the result holds for any u.

References
----------
C. Calauzènes, N. Usunier, P. Gallinari. "Calibration and regret bounds for order-preserving
surrogate losses in learning to rank." Machine Learning 93(2-3):227-260, 2013. Definitions 2.3,
3.1; Theorems 3.2, 3.3; Corollary 4.5.
J. Duchi, L. Mackey, M. Jordan. "On the consistency of ranking algorithms." ICML 2010.
I. Steinwart. "How to compare different loss functions and their risks." Constructive
Approximation 26(2):225-287, 2007.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from rankwise._validation import torch_single_thread
from rankwise.errors import InputError
from rankwise.theory.gppm import GPPM, err, get_measure
from rankwise.theory.inner import (
    Distribution, InnerRisk, _resolve_loss, all_permutations, label_space, make_inner_risk,
    minimize_inner_risk, minimize_inner_risk_in_cone, performance_table, perms_of_scores,
)

__all__ = ["Counterexample", "CalibrationReport", "check_calibration", "check_order_preserving"]


@dataclass
class Counterexample:
    """A distribution Δ at which minimising the inner risk ranks sub-optimally.

    Attributes
    ----------
    distribution : Distribution
        Δ (support and probabilities).
    s_star : ndarray
        The minimiser found, ``L(Δ, s*) ≈ L̲(Δ)``.
    regret : float
        Metric regret ``R̄(Δ) − R(Δ, s*)`` it causes (exact under ties).
    risk_gap : float
        Certificate: ``min over optimal orderings σ of inf_{s ∈ cone(σ)} L(Δ, s) − L(Δ, s*)``.
    best_order : ndarray
        An optimal permutation of the metric (items, best first).
    expected_utility : ndarray or None
        ``U(Δ)`` for a GPPM.
    strategy : str
        Which search found it (``grid``, ``random``, ``adversarial``).
    """

    distribution: Distribution
    s_star: np.ndarray
    regret: float
    risk_gap: float
    best_order: np.ndarray
    expected_utility: np.ndarray | None
    strategy: str

    def __str__(self) -> str:
        lines = [str(self.distribution),
                 f"  inner-risk minimiser s* = {np.array2string(self.s_star, precision=4, separator=', ')}",
                 f"  ranks items as {np.argsort(-self.s_star, kind='stable').tolist()}; "
                 f"an optimal order is {self.best_order.tolist()}"]
        if self.expected_utility is not None:
            lines.append(f"  U(Δ) = {np.array2string(self.expected_utility, precision=4, separator=', ')}")
        lines.append(f"  metric regret R̄(Δ) − R(Δ, s*) = {self.regret:.6g}; every optimally ordered s "
                     f"has inner risk ≥ L(Δ, s*) + {self.risk_gap:.3g}  (found by {self.strategy} search)")
        return "\n".join(lines)


@dataclass
class CalibrationReport:
    """Verdict of :func:`check_calibration`; ``str(report)`` is a readable summary."""

    loss: str
    metric: str
    calibrated: bool
    counterexample: Counterexample | None
    n_items: int
    n_levels: int
    n_distributions: int
    by_strategy: dict = field(default_factory=dict)
    max_regret_seen: float = 0.0
    seconds: float = 0.0
    hyper: dict = field(default_factory=dict)

    def __str__(self) -> str:
        head = (f"loss {self.loss!r} vs metric {self.metric!r} on {{0..{self.n_levels - 1}}}^{self.n_items}: "
                + ("CALIBRATED on every distribution tried" if self.calibrated else "NOT CALIBRATED"))
        tried = ", ".join(f"{k} {v}" for k, v in self.by_strategy.items())
        lines = [head, f"  distributions tried: {self.n_distributions} ({tried}); {self.seconds:.1f} s"]
        if self.hyper:
            lines.append(f"  loss hyper-parameters: {self.hyper}")
        if self.counterexample is not None:
            lines.append("  counterexample:")
            lines += ["  " + ln for ln in str(self.counterexample).splitlines()]
        else:
            lines.append("  (no counterexample: this is evidence on the distributions tried, not a proof)")
        return "\n".join(lines)


class _Checker:
    def __init__(self, loss, metric, n_items, n_levels, instance, seed, hyper, convex, n_starts):
        self.measure = get_measure(metric)
        if self.measure.name == "err":
            self.measure = err(y_max=n_levels - 1)
        if self.measure.name in ("ap", "auc", "p", "r") or self.measure.name.startswith(("p@", "r@")):
            if n_levels != 2:
                raise InputError(f"metric {self.measure.name!r} takes binary labels: n_levels must be 2; got {n_levels}")
        self.n = n_items
        if self.measure.name == "spearman":
            self.Y = all_permutations(n_items).astype(np.float64) + 1.0
        else:
            self.Y = label_space(n_items, n_levels)
        self.perms = all_permutations(n_items)
        self.V = performance_table(self.measure, self.Y, self.perms)  # (K, n!)
        fn, name, spec = _resolve_loss(loss, hyper)
        self.loss_name = name
        self.convex = bool(getattr(spec, "convex", False)) if convex is None else bool(convex)
        defaults = dict(getattr(spec, "defaults", {}) or {})
        self.hyper = dict(hyper)
        is_template = "utility" in defaults or "utility" in self.hyper
        if instance is None:
            # an explicit utility= is the user's choice of u: the loss applies it to raw labels
            instance = "metric" if is_template and "utility" not in self.hyper else "labels"
        if instance == "metric":
            if isinstance(self.measure, GPPM):
                self.targets = np.stack([self.measure.utility(y) for y in self.Y])
            else:
                self.targets = self.Y.copy()
            if is_template:
                self.hyper["utility"] = "linear"
        elif instance == "labels":
            self.targets = self.Y.copy()
        elif callable(instance):
            self.targets = np.stack([np.asarray(instance(y), dtype=np.float64) for y in self.Y])
            if is_template:
                self.hyper["utility"] = "linear"
        else:
            raise InputError(f"instance must be None, 'metric', 'labels' or a callable y -> u(y); got {instance!r}")
        self.instance = instance if isinstance(instance, str) else "callable"
        if "eta" in defaults and "eta" not in hyper:
            # Table 2 needs eta > max_i U_i(Δ); 1.25 × the largest utility keeps minimisers finite.
            self.hyper["eta"] = float(max(1.25 * self.targets.max(), 1e-3))
        self.fn = fn
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.n_starts = n_starts
        self.max_regret = 0.0

    # --------------------------------------------------------------------------------------
    def risk(self, probs: np.ndarray) -> InnerRisk:
        dist = Distribution(self.Y, probs)
        return make_inner_risk(self.fn, dist, targets=self.targets, convex=self.convex, **self.hyper)

    def evaluate(self, probs: np.ndarray):
        """(regret, s*, risk, R values per permutation, misorder score)."""
        risk = self.risk(probs)
        s_star, l_star = minimize_inner_risk(risk, n_starts=self.n_starts, seed=self.seed)
        rvals = probs @ self.V
        rbar = rvals.max()
        idx = perms_of_scores(s_star, self.perms)
        regret = float(rbar - rvals[idx].mean())
        best = self.perms[int(np.argmax(rvals))]
        spread = np.ptp(s_star) + 1e-12
        # smooth misorder score for the adversarial search: how far s* is from the best order
        score = max(float(s_star[best[b]] - s_star[best[a]]) / spread
                    for a in range(self.n) for b in range(a + 1, self.n))
        return regret, s_star, l_star, risk, rvals, score

    def certify(self, probs, s_star, l_star, risk, rvals):
        """Smallest inner risk over the closed cones of the optimal permutations, minus L(Δ, s*)."""
        rbar = rvals.max()
        tol = 1e-9 * max(1.0, abs(rbar))
        optimal = np.nonzero(rvals >= rbar - tol)[0]
        best = np.inf
        for j in optimal:
            _, lc = minimize_inner_risk_in_cone(risk, self.perms[j], n_starts=self.n_starts, seed=self.seed)
            best = min(best, lc)
            if best - l_star <= self.gap_tol(l_star):
                break
        return float(best - l_star), self.perms[optimal[0]]

    @staticmethod
    def gap_tol(l_star: float) -> float:
        return 1e-6 * max(1.0, abs(l_star))

    def try_one(self, probs, strategy):
        regret, s_star, l_star, risk, rvals, score = self.evaluate(probs)
        self.max_regret = max(self.max_regret, regret)
        if regret <= 1e-7 * max(1.0, abs(rvals.max())):
            return None, score
        gap, best = self.certify(probs, s_star, l_star, risk, rvals)
        if gap <= self.gap_tol(l_star):
            return None, score
        U = None
        if isinstance(self.measure, GPPM):
            U = probs @ np.stack([self.measure.utility(y) for y in self.Y])
        dist = Distribution(self.Y, probs).compact(0.0)
        return Counterexample(dist, s_star, regret, gap, best, U, strategy), score

    # --------------------------------------------------------------------------------------
    def grid(self, budget):
        K = len(self.Y)
        pairs = [(a, b) for a in range(K) for b in range(a + 1, K)]
        weights = (0.25, 0.5, 0.75)
        cand = [(a, b, w) for a, b in pairs for w in weights]
        if len(cand) > budget:
            step = len(cand) / budget
            cand = [cand[int(i * step)] for i in range(budget)]
        for a, b, w in cand:
            p = np.zeros(K)
            p[a], p[b] = w, 1.0 - w
            yield p

    def random(self, budget):
        K = len(self.Y)
        for i in range(budget):
            kind = i % 3
            if kind == 0:
                yield self.rng.dirichlet(np.ones(K))
            elif kind == 1:
                yield self.rng.dirichlet(np.full(K, 0.2))
            else:
                m = int(self.rng.integers(2, min(K, 4) + 1))
                sup = self.rng.choice(K, size=m, replace=False)
                p = np.zeros(K)
                p[sup] = self.rng.dirichlet(np.ones(m))
                yield p


def check_calibration(loss, metric, n_items: int = 3, *, n_levels: int | None = None,
                      instance=None, n_grid: int = 120, n_random: int = 150,
                      n_adversarial: int = 60, seed: int = 0, convex: bool | None = None,
                      n_starts: int | None = None, time_limit: float | None = None,
                      random_state: int | None = None, **hyper) -> CalibrationReport:
    """Search distributions Δ for a counterexample to the calibration of ``loss`` with ``metric``.

    Parameters
    ----------
    loss : str or callable
        A :mod:`rankwise.losses` registry name or a loss function
        ``fn(scores, labels, *, reduction="none", **hyper)`` on ``[batch, list]`` tensors.
    metric : str or GPPM or RankMeasure
        ``"dcg"``, ``"ndcg@3"``, ``"p@2"``, ``"r@2"``, ``"auc"``, ``"spearman"``, ``"err"``, ``"ap"``, ...
    n_items : int
        List length n (2 ≤ n ≤ 6 keeps the search fast).
    n_levels : int, optional
        Labels take values ``0..n_levels-1``; default 2 for binary measures (P@k, R@k, AUC, AP,
        ERR) and 3 otherwise.
    instance : None, "metric", "labels" or callable
        What the loss receives as labels. ``"metric"`` (the default for template losses, i.e.
        losses with a ``utility`` hyper-parameter) passes the metric's utilities ``v = u(y)`` with
        ``utility="linear"``: the u-instance of the template. ``"labels"`` (default otherwise)
        passes the raw label vectors (and any ``utility=`` hyper-parameter is left to the loss;
        passing ``utility=`` makes ``"labels"`` the default); a callable ``y -> v`` passes its output.
    n_grid, n_random, n_adversarial : int
        Budget of each search strategy (grid of two-point mixtures, Dirichlet draws, hill-climb).
    seed : int
        Seed of every random choice (the search is reproducible).
    convex : bool, optional
        Overrides the registry's convexity flag (convex: one L-BFGS run; else multi-start).
    time_limit : float, optional
        Stop searching after this many seconds (the report says how many Δ were tried).
    random_state : int, optional
        Alias of ``seed`` (the scikit-learn spelling); wins when given.
    **hyper
        Loss hyper-parameters (``eta``, ``sigma``, ...).

    Returns
    -------
    CalibrationReport
        ``.calibrated`` and ``.counterexample`` (None when calibrated on everything tried).

    Notes
    -----
    Implements the definition of calibration (Definition 2.3) with the finite-supervision
    certificate described in the module docstring. Assumptions: finite label space, the loss
    continuous in s (Corollary 4.5).

    References
    ----------
    Calauzènes, Usunier & Gallinari (2013), Definition 2.3, Theorems 3.2 and 3.3.
    """
    if random_state is not None:
        seed = random_state
    if not isinstance(seed, (int, np.integer)):
        raise InputError(f"seed must be an integer; got {seed!r}")
    if not isinstance(n_items, (int, np.integer)) or not 2 <= n_items <= 6:
        raise InputError(f"n_items must be an integer in [2, 6]; got {n_items!r}")
    measure = get_measure(metric)
    binary = measure.name in ("ap", "err", "auc") or measure.name.startswith(("p@", "r@"))
    if n_levels is None:
        n_levels = 2 if binary else 3
    if not isinstance(n_levels, (int, np.integer)) or n_levels < 2:
        raise InputError(f"n_levels must be an integer ≥ 2; got {n_levels!r}")
    for nm, v in (("n_grid", n_grid), ("n_random", n_random), ("n_adversarial", n_adversarial)):
        if not isinstance(v, (int, np.integer)) or v < 0:
            raise InputError(f"{nm} must be a non-negative integer; got {v!r}")
    with torch_single_thread():
        return _check_calibration(loss, measure, n_items, n_levels, instance, n_grid, n_random,
                                  n_adversarial, seed, convex, n_starts, time_limit, hyper)


def _check_calibration(loss, measure, n_items, n_levels, instance, n_grid, n_random, n_adversarial,
                       seed, convex, n_starts, time_limit, hyper) -> CalibrationReport:
    t0 = time.perf_counter()
    chk = _Checker(loss, measure, int(n_items), int(n_levels), instance, seed, hyper, convex, n_starts)
    counts = {"grid": 0, "random": 0, "adversarial": 0}
    found = None
    scored = []  # (score, probs) for the adversarial phase

    def out_of_time():
        return time_limit is not None and time.perf_counter() - t0 > time_limit

    # grid and random candidates interleaved (one of each in turn), then the adversarial phase
    def interleaved():
        gens = [("grid", chk.grid(n_grid)), ("random", chk.random(n_random))]
        while gens:
            for item in list(gens):
                try:
                    yield item[0], next(item[1])
                except StopIteration:
                    gens.remove(item)

    for strategy, probs in interleaved():
        if out_of_time():
            break
        counts[strategy] += 1
        found, score = chk.try_one(probs, strategy)
        if found is not None:
            break
        scored.append((score, probs))

    if found is None and n_adversarial > 0 and scored and not out_of_time():
        scored.sort(key=lambda t: -t[0])
        starts = [p for _, p in scored[:3]]
        steps = max(1, n_adversarial // len(starts))
        K = len(chk.Y)
        for p in starts:
            cur, cur_score = p, None
            for step in range(steps):
                if out_of_time() or found is not None:
                    break
                t = 0.5 * (0.9 ** step) + 0.02
                cand = (1 - t) * cur + t * chk.rng.dirichlet(np.full(K, 0.3))
                counts["adversarial"] += 1
                found, score = chk.try_one(cand, "adversarial")
                if cur_score is None or score > cur_score:
                    cur, cur_score = cand, score
            if found is not None:
                break

    name = measure.name
    return CalibrationReport(
        loss=chk.loss_name, metric=name, calibrated=found is None, counterexample=found,
        n_items=int(n_items), n_levels=int(n_levels), n_distributions=sum(counts.values()),
        by_strategy=counts, max_regret_seen=chk.max_regret, seconds=time.perf_counter() - t0,
        hyper={k: v for k, v in chk.hyper.items()},
    )


def check_order_preserving(loss, n_items: int = 3, *, gain: str = "linear", n_levels: int = 3,
                           **kwargs) -> CalibrationReport:
    """Is ``loss`` order-preserving w.r.t. ``u(y) = gain(y)`` (Definition 3.1)?

    Checked as calibration with DCG (no cutoff; strictly decreasing discount), which is
    equivalent by Theorem 3.2 (claim 2) and Corollary 4.5 (claim 3) of Calauzènes et al. (2013).
    """
    from rankwise.theory.gppm import dcg

    return check_calibration(loss, dcg(None, gain=gain), n_items, n_levels=n_levels, **kwargs)
