"""Inner risk and inner performance for a distribution over a finite supervision space.

For a distribution Δ over label vectors ``y ∈ Y`` (finite), a scoring loss ℓ and a ranking
performance measure r (Calauzènes, Usunier & Gallinari 2013, Definition 2.3):

.. math::

    L(\\Delta, s) = \\sum_{y} \\Delta(y)\\, \\ell(y, s), \\qquad
    \\underline{L}(\\Delta) = \\inf_{s \\in \\mathbb{R}^n} L(\\Delta, s),

    R(\\Delta, s) = \\sum_{y} \\Delta(y)\\, r(y, s), \\qquad
    \\overline{R}(\\Delta) = \\sup_{s} R(\\Delta, s) = \\max_{\\sigma} R(\\Delta, \\sigma).

``r(y, s)`` is the scoring performance (expectation over random tie-breaking). For a
(u, φ)-GPPM, ``R(Δ, σ) = E_Δ[b] + Σ_k φ(k) U_{σ(k)}(Δ)`` with ``U(Δ) = E_Δ[u(y)]``, so the supremum is
reached by sorting the items by decreasing ``U(Δ)`` (eq. (2), rearrangement inequality); for
ERR and AP the supremum is found by enumerating the n! permutations.

References
----------
C. Calauzènes, N. Usunier, P. Gallinari. "Calibration and regret bounds for order-preserving
surrogate losses in learning to rank." Machine Learning 93(2-3):227-260, 2013 (Sect. 2.2, eq. (2)).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from rankwise.errors import InputError
from rankwise.theory.gppm import GPPM, get_measure, tie_blocks

__all__ = [
    "Distribution", "label_space", "expected_utility", "inner_performance", "best_performance",
    "performance_table", "InnerRisk", "make_inner_risk", "minimize_inner_risk",
    "minimize_inner_risk_in_cone", "all_permutations",
]

_MAX_PERM_N = 8


@dataclass(frozen=True)
class Distribution:
    """A distribution Δ over a finite set of label vectors.

    Attributes
    ----------
    labels : ndarray (K, n)
        The support: one label vector per row.
    probs : ndarray (K,)
        Probabilities, non-negative, summing to 1.
    """

    labels: np.ndarray
    probs: np.ndarray

    def __post_init__(self):
        try:
            lab = np.asarray(self.labels, dtype=np.float64)
            p = np.asarray(self.probs, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InputError(f"Distribution: labels and probs must be numeric; {exc}") from None
        if lab.ndim != 2 or lab.shape[0] == 0 or lab.shape[1] < 2:
            raise InputError(f"Distribution.labels must be (K, n) with K ≥ 1, n ≥ 2; got shape {lab.shape}")
        if p.shape != (lab.shape[0],):
            raise InputError(f"Distribution.probs must have shape ({lab.shape[0]},); got {p.shape}")
        if not (np.all(np.isfinite(lab)) and np.all(np.isfinite(p))):
            raise InputError("Distribution contains NaN or inf")
        if np.any(p < 0) or not math.isclose(p.sum(), 1.0, rel_tol=0, abs_tol=1e-9):
            raise InputError(f"Distribution.probs must be non-negative and sum to 1; got sum {p.sum()!r}")
        object.__setattr__(self, "labels", lab)
        object.__setattr__(self, "probs", p / p.sum())

    @property
    def n_items(self) -> int:
        return self.labels.shape[1]

    def compact(self, tol: float = 0.0) -> "Distribution":
        """Drop support points with probability ≤ tol."""
        keep = self.probs > tol
        return Distribution(self.labels[keep], self.probs[keep] / self.probs[keep].sum())

    def __str__(self) -> str:
        rows = [f"  P={p:.4f}  y={np.array2string(y, precision=0, separator=',')}"
                for y, p in zip(self.labels, self.probs) if p > 0]
        return "Δ over label vectors:\n" + "\n".join(rows)


def label_space(n_items: int, n_levels: int = 2) -> np.ndarray:
    """All label vectors of ``{0, ..., n_levels-1}^n_items`` (rows), lexicographic order."""
    if n_items < 2 or n_levels < 2:
        raise InputError(f"label_space needs n_items ≥ 2 and n_levels ≥ 2; got {n_items}, {n_levels}")
    return np.array(list(itertools.product(range(n_levels), repeat=n_items)), dtype=np.float64)


def all_permutations(n: int) -> np.ndarray:
    if n > _MAX_PERM_N:
        raise InputError(f"enumerating permutations needs n ≤ {_MAX_PERM_N}; got n = {n}")
    return np.array(list(itertools.permutations(range(n))), dtype=np.int64)


def expected_utility(metric, dist: Distribution) -> np.ndarray:
    """``U(Δ) = Σ_y Δ(y) u(y)`` for a GPPM (Calauzènes et al. 2013, Sect. 3 notation)."""
    m = get_measure(metric)
    if not getattr(m, "is_gppm", False):
        raise InputError(f"expected_utility needs a GPPM; {m.name!r} is not one (no utility u)")
    return dist.probs @ np.stack([m.utility(y) for y in dist.labels])


def performance_table(metric, labels: np.ndarray, perms: np.ndarray | None = None) -> np.ndarray:
    """``V[y, σ] = r(y, σ)`` for every support point and permutation (brute force)."""
    m = get_measure(metric)
    labels = np.asarray(labels, dtype=np.float64)
    perms = all_permutations(labels.shape[1]) if perms is None else perms
    if isinstance(m, GPPM):
        phi = m.discount(labels.shape[1])
        U = np.stack([m.utility(y) for y in labels])  # (K, n)
        b = np.array([m.offset(y) for y in labels])
        # value = b + Σ_k φ(k) u[σ(k)]
        return b[:, None] + np.einsum("kp,p->k", U[:, perms].reshape(-1, perms.shape[1]), phi).reshape(len(labels), len(perms))
    return np.array([[m.value_fn(y, sig) for sig in perms] for y in labels])


def inner_performance(metric, dist: Distribution, s) -> float:
    """``R(Δ, s) = Σ_y Δ(y) r(y, s)`` with exact random tie-breaking."""
    m = get_measure(metric)
    s = np.asarray(s, dtype=np.float64)
    if s.shape != (dist.n_items,):
        raise InputError(f"s must have shape ({dist.n_items},); got {s.shape}")
    return float(sum(p * m.score(y, s) for y, p in zip(dist.labels, dist.probs) if p > 0))


def best_performance(metric, dist: Distribution, *, method: str = "auto") -> tuple[float, np.ndarray]:
    """``(R̄(Δ), σ*)``: the supremum of the inner performance and a permutation reaching it.

    For a GPPM (``method="auto"`` or ``"sort"``) σ* sorts the items by decreasing ``U(Δ)``
    (Calauzènes et al. 2013, eq. (2)); otherwise (``"brute"``, or ERR/AP) all n! permutations are
    scored.
    """
    m = get_measure(metric)
    if method not in ("auto", "sort", "brute"):
        raise InputError(f"method must be 'auto', 'sort' or 'brute'; got {method!r}")
    if isinstance(m, GPPM) and method in ("auto", "sort"):
        U = expected_utility(m, dist)
        sigma = np.argsort(-U, kind="stable")
        return float(dist.probs @ np.array([m.value(y, sigma) for y in dist.labels])), sigma
    if method == "sort":
        raise InputError(f"method='sort' needs a GPPM; {m.name!r} is not one")
    perms = all_permutations(dist.n_items)
    vals = dist.probs @ performance_table(m, dist.labels, perms)
    best = int(np.argmax(vals))
    return float(vals[best]), perms[best]


# --------------------------------------------------------------------------- inner risk


def check_loss_hyper(fn, name: str, hyper: dict) -> None:
    """Raise :class:`InputError` for a hyper-parameter ``fn`` does not take (instead of a raw TypeError).

    The loss's keyword arguments are read from its signature; a loss taking ``**kwargs`` accepts
    anything.
    """
    import inspect

    if not hyper:
        return
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins without a signature: let the call decide
        return
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return
    taken = [n for n, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
             and n not in ("scores", "labels", "where", "weights", "reduction")]
    unknown = sorted(set(hyper) - set(taken))
    if unknown:
        raise InputError(f"loss {name!r} takes no hyper-parameter {', '.join(map(repr, unknown))}; "
                         f"its hyper-parameters are: {', '.join(taken) if taken else 'none'}")


def _resolve_loss(loss, hyper: dict):
    """``(callable, name, spec_or_None)`` for a registry name or a loss function (``hyper`` checked)."""
    fn, name, spec = _resolve_loss_unchecked(loss)
    check_loss_hyper(fn, name, hyper)
    return fn, name, spec


def _resolve_loss_unchecked(loss):
    if callable(loss):
        return loss, getattr(loss, "__name__", "loss"), None
    if not isinstance(loss, str):
        raise InputError(f"loss must be a registry name or a callable; got {type(loss).__name__}")
    from rankwise import losses as _losses

    if loss not in _losses.REGISTRY:
        raise InputError(f"unknown loss {loss!r}; registered losses: {', '.join(sorted(_losses.REGISTRY))}")
    return _losses.get(loss), loss, _losses.spec(loss)


@dataclass
class InnerRisk:
    """``s ↦ L(Δ, s) = Σ_y Δ(y) ℓ(y, s)`` with its gradient (torch autograd, float64).

    ``targets`` are the label vectors handed to the loss: for a template loss, the utilities
    ``u(y)`` (the u-instance ``ℓ^u(y, s) = ℓ(u(y), s)``, Definition 2.2); otherwise the labels.
    """

    fn: object
    targets: np.ndarray
    probs: np.ndarray
    hyper: dict = field(default_factory=dict)
    name: str = "loss"
    convex: bool = False

    def __post_init__(self):
        import torch

        self._torch = torch
        keep = self.probs > 0
        self._Y = torch.as_tensor(self.targets[keep], dtype=torch.float64)
        self._p = torch.as_tensor(self.probs[keep], dtype=torch.float64)

    def _value_t(self, s_t):
        torch = self._torch
        S = s_t.unsqueeze(0).expand(self._Y.shape[0], -1)
        out = self.fn(S, self._Y, reduction="none", **self.hyper)
        if out.ndim == 2:  # per-item values: the list loss is their sum
            out = out.sum(-1)
        if out.shape != self._p.shape:
            raise InputError(f"loss {self.name!r} with reduction='none' returned shape {tuple(out.shape)}; "
                             f"expected one value per list ({self._p.shape[0]},)")
        return torch.dot(self._p, out)

    def value(self, s) -> float:
        torch = self._torch
        with torch.no_grad():
            return float(self._value_t(torch.as_tensor(np.asarray(s, dtype=np.float64))))

    def values(self, S) -> np.ndarray:
        """``L(Δ, s_b)`` for every row ``s_b`` of ``S`` (B, n), in one call of the loss."""
        torch = self._torch
        S = np.asarray(S, dtype=np.float64)
        if S.ndim != 2 or S.shape[1] != self._Y.shape[1]:
            raise InputError(f"S must have shape (B, {self._Y.shape[1]}); got {S.shape}")
        B, K = S.shape[0], self._Y.shape[0]
        with torch.no_grad():
            St = torch.as_tensor(S).repeat_interleave(K, dim=0)
            out = self.fn(St, self._Y.repeat(B, 1), reduction="none", **self.hyper)
            if out.ndim == 2:
                out = out.sum(-1)
            if out.shape != (B * K,):
                raise InputError(f"loss {self.name!r} with reduction='none' returned shape {tuple(out.shape)}; "
                                 f"expected one value per list ({B * K},)")
            vals = (out.reshape(B, K) @ self._p).numpy().copy()
        if not np.all(np.isfinite(vals)):
            raise InputError(f"loss {self.name!r} returned a non-finite inner risk at s = {S[~np.isfinite(vals)][0]}")
        return vals

    def value_and_grad(self, s) -> tuple[float, np.ndarray]:
        torch = self._torch
        s_t = torch.tensor(np.asarray(s, dtype=np.float64), requires_grad=True)
        v = self._value_t(s_t)
        (g,) = torch.autograd.grad(v, s_t)
        val, grad = float(v.detach()), g.numpy().copy()
        if not np.isfinite(val) or not np.all(np.isfinite(grad)):
            raise InputError(f"loss {self.name!r} returned a non-finite value or gradient at s = {s}")
        return val, grad


def make_inner_risk(loss, dist: Distribution, *, targets: np.ndarray | None = None,
                    convex: bool | None = None, **hyper) -> InnerRisk:
    """Build the inner risk ``L(Δ, ·)`` of a registry loss name or loss function."""
    fn, name, spec = _resolve_loss(loss, hyper)
    if convex is None:
        convex = bool(getattr(spec, "convex", False))
    tg = dist.labels if targets is None else np.asarray(targets, dtype=np.float64)
    if tg.shape != dist.labels.shape:
        raise InputError(f"targets must have shape {dist.labels.shape}; got {tg.shape}")
    return InnerRisk(fn, tg, dist.probs, dict(hyper), name, convex)


def _lbfgs(f, x0, bounds=None, maxiter=500):
    from scipy.optimize import minimize

    res = minimize(f, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                   options={"maxiter": maxiter, "ftol": 1e-15, "gtol": 1e-11, "maxcor": 30})
    return res.x, float(res.fun)


def minimize_inner_risk(risk: InnerRisk, *, n_starts: int | None = None, seed: int = 0,
                        scale: float = 1.0) -> tuple[np.ndarray, float]:
    """``(s*, L(Δ, s*))``: a minimiser of the inner risk, approximating ``L̲(Δ)``.

    Convex losses: L-BFGS from ``s = 0`` to tolerance (gtol 1e-11). Non-convex losses:
    multi-start L-BFGS (``n_starts`` random starts ~ N(0, scale²) plus ``s = 0``), best kept.
    """
    n = risk.targets.shape[1]
    starts = [np.zeros(n)]
    k = (0 if risk.convex else 8) if n_starts is None else n_starts
    rng = np.random.default_rng(seed)
    starts += [rng.normal(0.0, scale, n) for _ in range(k)]
    best = None
    for x0 in starts:
        x, fx = _lbfgs(risk.value_and_grad, x0)
        if best is None or fx < best[1]:
            best = (x, fx)
    return best


def minimize_inner_risk_in_cone(risk: InnerRisk, sigma, *, n_starts: int | None = None,
                                seed: int = 0) -> tuple[np.ndarray, float]:
    """Minimise ``L(Δ, s)`` over the closed cone ``{s : s_{σ(1)} ≥ s_{σ(2)} ≥ ... ≥ s_{σ(n)}}``.

    Parametrised as ``s_{σ(n)} = t``, ``s_{σ(k)} = s_{σ(k+1)} + d_k`` with ``d_k ≥ 0`` (L-BFGS-B
    bounds); the map is linear, so a convex loss stays convex in ``(t, d)``.
    """
    sigma = np.asarray(sigma, dtype=np.int64)
    n = len(sigma)
    # s = A z, z = (t, d_1..d_{n-1}); s_{σ(k)} = t + Σ_{j ≥ k} d_j
    A = np.zeros((n, n))
    for k in range(n):
        A[sigma[k], 0] = 1.0
        A[sigma[k], k + 1:] = 1.0

    def f(z):
        v, g = risk.value_and_grad(A @ z)
        return v, A.T @ g

    bounds = [(None, None)] + [(0.0, None)] * (n - 1)
    rng = np.random.default_rng(seed)
    k = (0 if risk.convex else 8) if n_starts is None else n_starts
    starts = [np.zeros(n)] + [np.concatenate([[rng.normal()], np.abs(rng.normal(size=n - 1))]) for _ in range(k)]
    best = None
    for z0 in starts:
        z, fz = _lbfgs(f, z0, bounds=bounds)
        if best is None or fz < best[1]:
            best = (A @ z, fz)
    return best


def perms_of_scores(s: np.ndarray, perms: np.ndarray) -> np.ndarray:
    """Indices (into ``perms``) of the permutations in ``argsort(s)`` (all tie-breaks)."""
    block_id = np.empty(len(s), dtype=np.int64)
    for b, blk in enumerate(tie_blocks(s)):
        block_id[blk] = b
    # σ is in argsort(s) iff the block ids along σ are non-decreasing
    ids = block_id[perms]
    return np.nonzero(np.all(np.diff(ids, axis=1) >= 0, axis=1))[0]


__all__.append("perms_of_scores")
