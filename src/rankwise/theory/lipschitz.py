"""Lipschitz constants of ranking surrogates with respect to the score vector.

A loss ``φ(s, y)`` is ``G``-Lipschitz w.r.t. a norm ``‖·‖`` on scores if
``|φ(s, y) − φ(s', y)| ≤ G ‖s − s'‖``; for a (sub)differentiable loss this is

.. math:: G_{\\|\\cdot\\|} = \\sup_{s, y} \\|\\nabla_s \\phi(s, y)\\|_{\\star},

with the dual norm ``‖·‖_⋆`` (ℓ1 for ℓ∞, ℓ2 for ℓ2). Chaudhuri & Tewari (2015) show that the
ℓ∞ constant is the one that enters generalisation bounds for linear rankers without an explicit
dependence on the list length m (their Sect. 5-7), and compute it for three losses (here under
the paper's names, each being a registered rankwise loss: ``listnet``, ``smooth_dcg1``,
``pairwise_hinge``), for the closed-form comparison:

- ListNet (top-1 cross entropy, ``P_j(v) = e^{v_j} / Σ_i e^{v_i}``):
  ``φ = −Σ_j P_j(y) log P_j(s)``; ``∇ = P(s) − P(y)``, so ``G_∞ ≤ 2`` for every m
  (Proposition 1) and ``G_2 ≤ √2``.
- Smoothed DCG@1 (Chapelle & Wu 2010): ``φ = −Σ_i G(y_i) e^{s_i/σ} / Σ_j e^{s_j/σ}`` with
  ``D(1) = 1``; Proposition 2 gives ``G_∞ ≤ 2 G(Y_max)/σ`` for every m. The exact supremum is
  ``G(Y_max)/(2σ)``: ``‖∇‖_1 = (1/σ) Σ_k p_k |G(y_k) − Ḡ|`` is a mean absolute deviation of a
  variable in ``[0, G(Y_max)]``, at most half its range (reached by two equiprobable items of
  gain 0 and ``G(Y_max)``).
- RankSVM (Joachims 2002): ``φ = Σ_{y_i > y_j} max(0, 1 + s_j − s_i)``; the gradient is
  ``Σ_{active pairs} (e_j − e_i)`` and ``G_∞ = ⌊m²/2⌋`` (appendix C: it grows with m). Exactness:
  with A the items whose out-degree ≥ in-degree in the active-pair graph,
  ``‖∇‖_1 = 2 Σ_{k∈A}(out_k − in_k) ≤ 2|A|(m − |A|) ≤ ⌊m²/2⌋``, reached by the binary half/half split.
  In ℓ2 the supremum over all labels is ``G_2 = √(m(m²−1)/3)``: the gradient is the vector
  ``d_k = out_k − in_k`` of an oriented graph; for the k vertices of largest ``d``,
  ``Σ d ≤ k(m − k)``, which the transitive tournament (all pairs active, m distinct labels,
  ``d = (m−1, m−3, ..., 1−m)``) attains with equality, so its ``d`` majorises every other and
  ``Σ d_k²`` (Schur-convex) is largest there: ``Σ (m − 2k + 1)² = m(m²−1)/3``.

:func:`lipschitz` estimates ``G`` numerically for any loss (registry name or function) by an
adversarial search over ``(s, y)``: structured starts (ties, label-aligned and reversed scores,
one-hot and half/half labels) and random ones, then a hill-climb on the dual norm of the autograd
gradient. The estimate is a lower bound of the true constant (a supremum), exact when the search
reaches the maximiser.

References
----------
S. Chaudhuri, A. Tewari. "Generalization error bounds for learning to rank: does the length of
document lists matter?" ICML 2015. Propositions 1 and 2, appendix C.
O. Chapelle, M. Wu. "Gradient descent optimization of smoothed information retrieval metrics."
Information Retrieval 13(3):216-235, 2010.
Z. Cao, T. Qin, T.-Y. Liu, M.-F. Tsai, H. Li. "Learning to rank: from pairwise approach to
listwise approach." ICML 2007.
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field

import numpy as np

from rankwise.errors import InputError

__all__ = [
    "LipschitzEstimate", "lipschitz", "closed_form_lipschitz", "listnet_ct_loss",
    "smoothed_dcg1_loss", "ranksvm_loss", "PAPER_LOSSES", "declared_constant",
]


# ---------------------------------------------------------------- the paper's three losses
# Each is a registered rankwise loss under the paper's name (same value and gradient; ``where``
# and ``weights`` are honoured as by every loss); the paper's names select the closed forms of
# :func:`closed_form_lipschitz` in :func:`lipschitz`.
def _registered(name: str):
    from rankwise.losses import get

    return get(name)


def listnet_ct_loss(scores, labels, *, where=None, weights=None, reduction="mean"):
    """ListNet top-1 cross entropy as in Chaudhuri & Tewari (2015, Sect. 3.1): the registered
    ``"listnet"`` loss at temperature 1.

    .. math:: \\phi(s, y) = -\\sum_j P_j(y) \\log P_j(s), \\quad P_j(v) = e^{v_j} / \\sum_i e^{v_i}
    """
    return _registered("listnet")(scores, labels, where=where, weights=weights, reduction=reduction)


def smoothed_dcg1_loss(scores, labels, *, where=None, weights=None, reduction="mean", sigma=1.0):
    """Negative smoothed DCG@1 (Chapelle & Wu 2010; Chaudhuri & Tewari 2015, Sect. 3.2): the
    registered ``"smooth_dcg1"`` loss with the exp2 gain.

    .. math:: \\phi(s, y) = -\\sum_i G(y_i) \\frac{e^{s_i/\\sigma}}{\\sum_j e^{s_j/\\sigma}}, \\quad G(r) = 2^r - 1
    """
    return _registered("smooth_dcg1")(scores, labels, where=where, weights=weights, reduction=reduction,
                                      sigma=sigma, gain="exp2")


def ranksvm_loss(scores, labels, *, where=None, weights=None, reduction="mean"):
    """RankSVM surrogate (Joachims 2002; Chaudhuri & Tewari 2015, appendix C): the registered
    ``"pairwise_hinge"`` loss without pair weights.

    .. math:: \\phi(s, y) = \\sum_{i,j:\\, y_i > y_j} \\max(0, 1 + s_j - s_i)
    """
    return _registered("pairwise_hinge")(scores, labels, where=where, weights=weights, reduction=reduction)


PAPER_LOSSES = {"listnet_ct": listnet_ct_loss, "smoothed_dcg1": smoothed_dcg1_loss, "ranksvm": ranksvm_loss}


def closed_form_lipschitz(loss: str, norm: str, m: int, *, max_label: int = 4, sigma: float = 1.0) -> dict:
    """Closed forms for the paper's losses: ``{"bound": paper's statement, "exact": sup or None}``.

    ``loss`` is one of ``listnet_ct``, ``smoothed_dcg1``, ``ranksvm``; ``norm`` ``"inf"`` or ``"2"``.
    """
    _check_norm(norm)
    g = 2.0 ** max_label - 1.0
    if loss == "listnet_ct":
        return {"bound": 2.0 if norm == "inf" else math.sqrt(2.0), "exact": None,
                "source": "Chaudhuri & Tewari (2015), Proposition 1 (ℓ∞); ‖P(s) − P(y)‖₂ ≤ √2"}
    if loss == "smoothed_dcg1":
        if norm != "inf":
            return {"bound": None, "exact": None, "source": "no closed form stated for ℓ2"}
        return {"bound": 2.0 * g / sigma, "exact": g / (2.0 * sigma),
                "source": "Proposition 2 (bound 2 G(Y_max)/σ); exact sup G(Y_max)/(2σ) (mean absolute deviation)"}
    if loss == "ranksvm":
        if norm != "inf":
            sup = math.sqrt(m * (m * m - 1) / 3.0)
            return {"bound": sup, "exact": sup if max_label + 1 >= m else None,
                    "source": "sup over all labels √(m(m²−1)/3) (majorisation, module docstring); "
                              "reached only with m distinct labels"}
        return {"bound": float(m * m // 2), "exact": float(m * m // 2),
                "source": "appendix C (O(m²)); exact ⌊m²/2⌋ (half/half split)"}
    raise InputError(f"no closed form for {loss!r}; known: listnet_ct, smoothed_dcg1, ranksvm")


def _check_norm(norm):
    if norm not in ("inf", "2"):
        raise InputError(f"norm must be 'inf' or '2'; got {norm!r}")


@dataclass
class LipschitzEstimate:
    """Result of :func:`lipschitz`: the estimate, where it was reached, and references to compare."""

    loss: str
    norm: str
    list_length: int
    estimate: float
    scores: np.ndarray
    labels: np.ndarray
    closed_form: dict | None
    declared: float | None
    hyper: dict = field(default_factory=dict)
    declared_note: str | None = None

    @property
    def declared_ok(self) -> bool | None:
        """``declared ≥ estimate`` (a declared constant must bound every gradient seen)."""
        if self.declared is None:
            return None
        return bool(self.declared >= self.estimate * (1 - 1e-9) - 1e-12)

    def __str__(self) -> str:
        s = (f"{self.loss}: G_{self.norm} ≈ {self.estimate:.6g} at m = {self.list_length} "
             f"(adversarial search; a lower bound of the supremum)")
        if self.closed_form:
            s += f"; closed form: bound {self.closed_form.get('bound')}, exact {self.closed_form.get('exact')}"
        if self.hyper:
            s += f"; hyper-parameters {self.hyper}"
        if self.declared is not None:
            s += f"; registry declares {self.declared:.6g} ({'consistent' if self.declared_ok else 'VIOLATED'})"
        if self.declared_note:
            s += f"; {self.declared_note}"
        return s


def _resolve(loss):
    if callable(loss):
        return loss, getattr(loss, "__name__", "loss"), None
    if isinstance(loss, str) and loss in PAPER_LOSSES:
        return PAPER_LOSSES[loss], loss, None
    if not isinstance(loss, str):
        raise InputError(f"loss must be a registry name or a callable; got {type(loss).__name__}")
    from rankwise.losses import REGISTRY, get, spec

    if loss not in REGISTRY:
        raise InputError(f"unknown loss {loss!r}; registered: {', '.join(sorted(REGISTRY))}; "
                         f"paper forms: {', '.join(PAPER_LOSSES)}")
    return get(loss), loss, spec(loss)


def lipschitz(loss, norm: str = "inf", list_length: int = 10, *, n_levels: int = 5,
              n_restarts: int = 64, n_steps: int = 60, seed: int = 0, **hyper) -> LipschitzEstimate:
    """Estimate the Lipschitz constant of ``loss`` in the scores by adversarial search.

    .. math:: \\hat G = \\max_{(s, y)\\ \\text{visited}} \\|\\nabla_s \\phi(s, y)\\|_\\star

    Parameters
    ----------
    loss : str or callable
        Registry name, one of the paper forms ``listnet_ct``, ``smoothed_dcg1``, ``ranksvm``, or a
        loss ``fn(scores, labels, *, reduction=..., **hyper)``. The per-list value (reduction
        ``"none"``) is differentiated.
    norm : {"inf", "2"}
        Norm on the scores; the dual norm (ℓ1, ℓ2) of the gradient is maximised.
    list_length : int
        m, the number of documents in the list.
    n_levels : int
        Labels are drawn from ``0..n_levels-1``.
    n_restarts, n_steps, seed
        Search budget and seed (reproducible).
    **hyper
        The loss's hyper-parameters (``temperature``, ``eta``, ``sigma``, ...), used by the search
        *and* by the declared constant.

    Returns
    -------
    LipschitzEstimate
        With the paper's closed form (for the three paper losses) and, for a registry loss, the
        constant its spec declares (``lipschitz_inf(m, ...)`` / ``lipschitz_2(m, ...)``) evaluated
        at the same hyper-parameters: every keyword the constant's function takes is filled from
        ``hyper`` (and ``y_max`` from the label range ``n_levels − 1``). A non-default
        hyper-parameter that the constant's function does not take leaves ``declared = None``
        (the registry states its constant for the default only) and says so in
        ``declared_note``.

    Raises
    ------
    InputError
        When the loss's gradient is NaN or infinite at a visited ``(s, y)`` (the message names
        the loss and the point): such a loss has no finite constant there, and hiding the point
        would bias the estimate.

    References
    ----------
    Chaudhuri & Tewari (2015), Sect. 2 (definition via the dual norm of the gradient).
    """
    _check_norm(norm)
    from rankwise._validation import torch_single_thread

    with torch_single_thread():
        return _lipschitz(loss, norm, list_length, n_levels, n_restarts, n_steps, seed, hyper)


def _lipschitz(loss, norm, list_length, n_levels, n_restarts, n_steps, seed, hyper) -> LipschitzEstimate:
    import torch

    if isinstance(list_length, (bool, np.bool_)) or not isinstance(list_length, (int, np.integer)) or list_length < 2:
        raise InputError(f"list_length must be an integer ≥ 2; got {list_length!r}")
    m = int(list_length)
    fn, name, spec = _resolve(loss)
    from rankwise.theory.inner import check_loss_hyper

    check_loss_hyper(fn, name, hyper)
    for nm, v, lo in (("n_levels", n_levels, 2), ("n_restarts", n_restarts, 1), ("n_steps", n_steps, 0),
                      ("seed", seed, 0)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < lo:
            raise InputError(f"{nm} must be an integer ≥ {lo}; got {v!r}")
    rng = np.random.default_rng(seed)
    L = n_levels - 1

    # structured label vectors and score vectors
    labs = [np.zeros(m), np.r_[np.full(m // 2, L), np.zeros(m - m // 2)],
            np.r_[[L], np.zeros(m - 1)], np.linspace(L, 0, m).round(), np.r_[np.full(m - 1, L), [0.0]]]
    while len(labs) < n_restarts:
        labs.append(rng.integers(0, n_levels, m).astype(np.float64))
    labs = np.stack(labs[:n_restarts])
    B = len(labs)
    kinds = np.arange(B) % 6
    S = np.zeros((B, m))
    for b in range(B):
        y = labs[b]
        k = kinds[b]
        if k == 1:
            S[b] = -y * 5.0
        elif k == 2:
            S[b] = y * 5.0
        elif k == 3:
            S[b] = rng.normal(0, 0.1, m)
        elif k == 4:
            S[b] = rng.normal(0, 3.0, m)
        elif k == 5:
            S[b] = np.where(np.arange(m) == rng.integers(m), 20.0, 0.0) * rng.choice([-1, 1])
    Y_t = torch.as_tensor(labs, dtype=torch.float64)

    def dual_norms(S_np):
        s_t = torch.tensor(S_np, dtype=torch.float64, requires_grad=True)
        out = fn(s_t, Y_t, reduction="none", **hyper)
        if out.ndim == 2:
            out = out.sum(-1)
        (g,) = torch.autograd.grad(out.sum(), s_t)
        g = g.detach().numpy()
        bad = ~np.all(np.isfinite(g), axis=1)
        if bad.any():
            b = int(np.argmax(bad))
            raise InputError(f"lipschitz: loss {name!r} has a non-finite gradient {g[b].tolist()} at scores "
                             f"{S_np[b].tolist()} with labels {labs[b].tolist()}"
                             + (f" and hyper-parameters {hyper}" if hyper else "")
                             + "; its Lipschitz constant is not finite there (or the loss is not differentiable)")
        return (np.abs(g).sum(1) if norm == "inf" else np.sqrt((g * g).sum(1))), g

    best_val, _ = dual_norms(S)
    best_S = S.copy()
    for step in range(n_steps):
        scale = 3.0 * (0.9 ** step) + 1e-3
        cand = best_S + rng.normal(0, scale, best_S.shape) * (rng.random(best_S.shape) < 0.3)
        val, _ = dual_norms(cand)
        better = val > best_val
        best_S[better] = cand[better]
        best_val[better] = val[better]
    i = int(np.argmax(best_val))
    closed = None
    if name in PAPER_LOSSES:
        closed = closed_form_lipschitz(name, norm, m, max_label=L, sigma=float(hyper.get("sigma", 1.0)))
    declared, note = None, None
    if spec is not None:
        declared, note = declared_constant(spec, norm, m, hyper, y_max=L)
    return LipschitzEstimate(name, norm, m, float(best_val[i]), best_S[i], labs[i], closed, declared,
                             dict(hyper), note)


# Hyper-parameters that change how a loss is computed, not its value (no effect on the constant).
_COMPUTATIONAL = frozenset({"method"})


def declared_constant(spec, norm: str, m: int, hyper: dict, *, y_max: float) -> tuple[float | None, str | None]:
    """``(constant, note)``: the registry's declared constant at ``m`` and the user's hyper-parameters.

    The spec's function ``f(m, **kw)`` is called with every keyword it accepts taken from
    ``hyper`` (``y_max`` from the label range when not given). If ``hyper`` sets, to a
    non-default value, a hyper-parameter that ``f`` does not take, the registry's constant (stated
    for the defaults) does not apply: ``(None, note)``.
    """
    attr = "lipschitz_inf" if norm == "inf" else "lipschitz_2"
    f = getattr(spec, attr, None)
    if not callable(f):
        return None, None
    params = list(inspect.signature(f).parameters.values())[1:]
    names = {p.name for p in params}
    kwargs = {k: v for k, v in hyper.items() if k in names}
    if "y_max" in names and "y_max" not in kwargs:
        kwargs["y_max"] = y_max
    defaults = getattr(spec, "defaults", {}) or {}
    ignored = sorted(k for k, v in hyper.items()
                     if k not in names and k not in _COMPUTATIONAL and (k not in defaults or defaults[k] != v))
    if ignored:
        shown = ", ".join(f"{k}={hyper[k]!r}" for k in ignored)
        return None, (f"the registry's {attr} is stated for the default {', '.join(ignored)} and its function "
                      f"takes no such argument, so it is not compared at {shown}")
    d = f(m, **kwargs)
    if d is None or not math.isfinite(float(d)):
        return None, None
    return float(d), None
