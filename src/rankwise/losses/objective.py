"""Any registered loss as a gradient-boosting objective: per-document gradient and positive Hessian.

:func:`grad_hess` works on flat score/label arrays with ``query_offsets``. Where the loss's
spec declares a compiled kernel for these hyperparameters (``spec.kernel``; see
:mod:`rankwise.losses._engine`) it runs that: per query, on the flat arrays, O(n) extra memory,
on ``n_jobs`` threads. Otherwise (and as the reference the kernels are tested against) queries
are padded into length buckets (bucket widths grow geometrically by 25 %, so padding wastes at
most a quarter of the cells) and each bucket is one batched autograd call; a dense O(L²) pair
form that would not fit in memory is refused before anything is allocated (by the loss). The gradient is that
of the *sum* of per-query losses (what a booster adds up). No NaN or inf is returned: a gradient
that overflows float64 (labels near 1e308) is refused with a message.

Hessian diagonal (``spec(loss).hessian``):

- ``"exact"``: separable losses (``spec.separable``: the pointwise templates and ``bregman``;
  the diagonal is the second derivative of each term, by double autograd); losses with a pair
  form (``spec.pair_form``: ``ranknet``, ``rankboost``, ``op_pairwise``, ``pairwise_squared``,
  ``lambdaloss`` with its weights held fixed): h_i = Σ_j W_ij φ''(s_i - s_j) + W_ji φ''(s_j - s_i);
  losses that declare ``spec.hessian_diag`` (``listnet``: (Σ_i w_i P_y(i)) p_k (1 - p_k) / τ²;
  ``listmle``: Σ over the suffix sets containing k of p (1 - p)).

  Where a pair-form loss has a sort-based form (``spec.fast_terms``: ``rankboost`` with pair
  weights "none" or "delta_label", ``op_pairwise`` with φ exponential or squared hinge,
  ``pairwise_squared``) the gradient and that same exact diagonal come from it in O(n log n)
  (``pairwise_squared``: O(n), h_i = 2 w_i (Σ_j w_j - w_i)); the others build the O(n²) pair
  matrices. ``method="dense"`` forces the pair matrices.
- ``"abs_grad"`` (hinges, whose curvature is 0 almost everywhere, and the non-convex
  ``smooth_dcg``, ``smooth_dcg1``, ``approx_ndcg``): h_i = |g_i|, which makes each leaf's Newton
  step -Σg/Σ|g| ∈ [-1, 1], a normalised gradient step.

Every Hessian is then clipped below at ``hess_floor`` (default 1e-6) so it is positive.
"""
from __future__ import annotations

import math

import numpy as np

from rankwise.errors import InputError
from rankwise.losses import _engine
from rankwise.losses._deferred import deferred
from rankwise.losses._utils import prepare
from rankwise.losses.pairwise import _dense
from rankwise.losses.registry import check_hyper, get, spec

torch = deferred("torch", globals())

BACKENDS = ("lightgbm", "lightgbm_sklearn", "xgboost")
# cells of a [B, L] bucket (times L for the O(L^2) losses) handled by one batched call
_CELL_BUDGET = 1 << 22


def _resolve(loss):
    if isinstance(loss, str):
        get(loss)
        return spec(loss)
    return spec(loss)


def _buckets(lengths: np.ndarray, quadratic: bool):
    """Yield arrays of query indices whose padded length is close (within 25 %)."""
    nz = np.flatnonzero(lengths > 0)
    if len(nz) == 0:
        return
    order = nz[np.argsort(lengths[nz], kind="stable")]
    ls = lengths[order]
    bounds = [1]
    while bounds[-1] < ls[-1]:
        bounds.append(max(bounds[-1] + 1, int(math.ceil(bounds[-1] * 1.25))))
    edges = np.searchsorted(ls, np.asarray(bounds), side="right")
    start = 0
    for e, L in zip(edges, bounds):
        if e > start:
            cells = L * L if quadratic else L
            per = max(1, _CELL_BUDGET // max(cells, 1))
            for s0 in range(start, e, per):
                yield order[s0:min(e, s0 + per)]
            start = e


def grad_hess(loss, scores_flat, labels_flat, offsets, *, weights=None, group_weights=None,
              hess_floor: float = 1e-6, return_value: bool = False, n_jobs=None, pairs=None, **hyper):
    """Per-document gradient and positive Hessian diagonal of ``sum_q loss(scores_q, labels_q)``.

    Parameters
    ----------
    loss : str or registered loss function.
    scores_flat, labels_flat : array-like, shape (n_rows,)
    offsets : array-like of int, shape (n_queries + 1,) — ``query_offsets``.
    weights : per-row weights (item weights), optional.
    group_weights : per-query weights, optional.
    hess_floor : lower clip of the Hessian.
    return_value : also return the loss itself, summed over the queries (weighted as the
        gradient); free for most losses, one extra elementwise pass for the O(n²) pair forms.
    n_jobs : threads of the compiled engine (None or -1: every CPU this process may use); the
        result does not depend on it.
    pairs : array-like of float, shape (sum over the queries of n_q²,), optional
        Given pair weights for a pairwise loss (ranknet, lambdarank, lambdaloss but ``ndcg1``, the
        hinge/exponential pairs in their dense form): query q's n_q x n_q block, row-major, the queries'
        blocks one after another; entry [i, j] >= 0 weighs the pair "i above j". The labels then choose
        no pair: the loss is the sum over the pairs of nonzero given weight of that weight times the item
        weights times the loss's pair weight at gain difference 1 and max DCG 1 (|ΔDCG| of swapping the
        two in the current ranking for ``pair_weights="delta_ndcg"``) times φ(s_i − s_j)
        (:mod:`rankwise.losses._engine`). O(n_q²) per query.
    **hyper : the loss's hyperparameters.

    Returns
    -------
    grad, hess : float64 ndarrays of shape (n_rows,).
    value : float, only with ``return_value=True``.
    """
    sp, hyper, kernel = _resolved(loss, hyper)
    return _grad_hess(sp, hyper, kernel, scores_flat, labels_flat, offsets, weights=weights,
                      group_weights=group_weights, hess_floor=_check_hess_floor(hess_floor),
                      return_value=return_value, n_jobs=n_jobs, pairs=pairs)


def _resolved(loss, hyper: dict):
    """The loss's spec, its checked hyperparameters and its compiled kernel (None: the torch path),
    resolved once per objective (:func:`as_objective`) rather than once per boosting round."""
    sp = _resolve(loss)
    hyper = check_hyper(sp.fn, hyper, loss=sp.name, param="**hyper")
    return sp, hyper, (sp.kernel(hyper) if sp.kernel is not None else None)


def _check_hess_floor(hess_floor) -> float:
    hess_floor = float(hess_floor)
    if not hess_floor > 0:
        raise InputError(f"hess_floor must be positive; got {hess_floor}")
    return hess_floor


def _grad_hess(sp, hyper, kernel, scores_flat, labels_flat, offsets, *, weights, group_weights, hess_floor,
               return_value, n_jobs, pairs=None):
    """:func:`grad_hess` on a resolved loss: the per-round work (the arrays' checks and the gradient)."""
    s_np = _float_array(scores_flat, "scores_flat")
    y_np = _float_array(labels_flat, "labels_flat")
    off = _int_array(offsets, "offsets")
    n = len(s_np)
    if len(y_np) != n:
        raise InputError(f"labels_flat has {len(y_np)} entries but scores_flat has {n}; they must match")
    if len(off) < 1 or off[0] != 0 or off[-1] != n or np.any(np.diff(off) < 0):
        raise InputError(f"offsets must be non-decreasing, start at 0 and end at n_rows={n}; "
                         f"got {len(off)} entries ending at {off[-1] if len(off) else None}")
    if not np.all(np.isfinite(s_np)):
        raise InputError("scores_flat contains NaN or inf")
    if not np.all(np.isfinite(y_np)):
        raise InputError(f"{sp.name}: labels_flat contains NaN or inf")
    w_np = None if weights is None else _float_array(weights, "weights")
    if w_np is not None and len(w_np) != n:
        raise InputError(f"weights has {len(w_np)} entries but there are {n} rows")
    if w_np is not None and (not np.all(np.isfinite(w_np)) or np.any(w_np < 0)):
        raise InputError(f"{sp.name}: weights must be finite and non-negative")
    gw = None if group_weights is None else _float_array(group_weights, "group_weights")
    if gw is not None and len(gw) != len(off) - 1:
        raise InputError(f"group_weights has {len(gw)} entries but there are {len(off) - 1} queries")
    if gw is not None and (not np.all(np.isfinite(gw)) or np.any(gw < 0)):
        raise InputError(f"{sp.name}: group_weights must be finite and non-negative")
    if pairs is not None:
        pairs = _float_array(pairs, "pairs")
        want = int(_engine.pairs_offsets(off)[-1])
        if pairs.ndim != 1 or len(pairs) != want:
            raise InputError(f"{sp.name}: pairs must be a flat array of the queries' n x n blocks of pair weights "
                             f"({want} entries for these offsets); got shape {pairs.shape}")
        if not np.all(np.isfinite(pairs)) or np.any(pairs < 0):
            raise InputError(f"{sp.name}: pairs (given pair weights) must be finite and non-negative")
        if kernel is None:
            raise InputError(f"{sp.name} takes no given pair weights (pairs=) with these hyperparameters: it has "
                             "no compiled pair kernel for them")
    if kernel is not None:
        vals, _, grad, hess = _engine.run(kernel, s_np, y_np, off, w_np, n_jobs, value=return_value, loss=sp.name,
                                          pairs=pairs)
        if gw is not None:
            vals = vals * gw
            row = np.repeat(gw, np.diff(off))
            grad *= row
            hess *= row
        if sp.hessian != "exact":
            hess = np.abs(grad)
        total = float(vals.sum())
    else:
        grad, hess, total = _torch_grad_hess(sp, hyper, s_np, y_np, off, w_np, gw, return_value)
    if not (np.all(np.isfinite(grad)) and np.all(np.isfinite(hess)) and math.isfinite(total)):
        raise InputError(f"{sp.name}: the gradient or Hessian overflows float64 (largest |label| "
                         f"{float(np.abs(y_np).max()):g}, largest |score| {float(np.abs(s_np).max()):g}); rescale the "
                         "labels or the scores")
    np.maximum(hess, hess_floor, out=hess)
    if return_value:
        return grad, hess, total
    return grad, hess


def _torch_grad_hess(sp, hyper, s_np, y_np, off, w_np, gw, return_value):
    """The torch reference path: queries padded into length buckets, one autograd call each."""
    fn = sp.fn
    n = len(s_np)
    grad = np.zeros(n)
    hess = np.zeros(n)
    total = 0.0
    lengths = np.diff(off)
    for qs in _buckets(lengths, sp.quadratic(hyper)):
        L = int(lengths[qs].max())
        ar = np.arange(L)
        m_np = ar[None, :] < lengths[qs][:, None]
        idx = np.where(m_np, off[qs][:, None] + ar[None, :], 0)
        mask = torch.from_numpy(m_np)
        s = torch.from_numpy(s_np[idx]).requires_grad_(True)
        y = torch.from_numpy(y_np[idx])
        w = None
        if w_np is not None:
            w = torch.from_numpy(np.where(m_np, w_np[idx], 0.0))
        lw = None if gw is None else torch.from_numpy(gw[qs])
        with torch.enable_grad():
            terms = None
            if sp.fast_terms is not None:
                terms = sp.fast_terms(prepare(s, y, mask, w, loss=sp.name), **hyper)
            if sp.separable:
                val = fn(s, y, where=mask, weights=w, reduction="none", **hyper)
                if lw is not None:
                    val = val * lw
                g = torch.autograd.grad(val.sum(), s, create_graph=True)[0]
                h = torch.autograd.grad(g.sum(), s)[0]
                g = g.detach()
            elif terms is not None:
                # the sort-based form: O(n log n) value, gradient and exact Hessian diagonal
                val, g, h = terms
                if lw is not None:
                    val, h = val * lw, h * lw[:, None]
                    g = None if g is None else g * lw[:, None]
                if g is None:
                    g = torch.autograd.grad(val.sum(), s)[0]
            elif sp.pair_form is not None and sp.hessian == "exact":
                # one pair form serves the value, the gradient and the exact Hessian diagonal
                b = prepare(s.detach(), y, mask, w, loss=sp.name)
                W, phi, _ = sp.pair_form(b, **hyper)
                if lw is not None:
                    W = W * lw[:, None, None]
                D = b.scores.unsqueeze(-1) - b.scores.unsqueeze(-2)
                G = W * phi.d1(D)  # W = 0 off the pairs; phi' and phi'' are finite everywhere
                g = G.sum(-1) - G.sum(-2)
                M = W * phi.d2(D)
                h = M.sum(-1) + M.sum(-2)
                val = _dense(b, W, phi) if return_value else None
            else:
                val = fn(s, y, where=mask, weights=w, reduction="none", **hyper)
                if lw is not None:
                    val = val * lw
                g = torch.autograd.grad(val.sum(), s)[0]
                if sp.hessian == "exact" and sp.hessian_diag is not None:
                    h = sp.hessian_diag(prepare(s.detach(), y, mask, w, loss=sp.name), **hyper)
                    if lw is not None:
                        h = h * lw[:, None]
                else:
                    h = g.abs()
        if return_value:
            total += float(val.detach().sum())
        g_np = g.numpy()
        h_np = h.detach().numpy()
        grad[idx[m_np]] = g_np[m_np]
        hess[idx[m_np]] = h_np[m_np]
    return grad, hess, total


def _float_array(x, name):
    try:
        a = np.asarray(x, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be an array of numbers; got {type(x).__name__} ({exc})") from None
    return a


def _int_array(x, name):
    a = _float_array(x, name)
    if not np.all(np.isfinite(a)) or np.any(a != np.round(a)):
        raise InputError(f"{name} must hold integers (query offsets); got non-integer values")
    return a.astype(np.int64)




def as_objective(loss, backend: str = "lightgbm", *, hess_floor: float = 1e-6, on_value=None, n_jobs=None,
                 value_every: int | None = 1, first_call: int = 0, **hyper):
    """A custom objective for LightGBM or XGBoost that minimises ``loss`` summed over queries.

    ``backend="lightgbm"``: ``fn(preds, train_data) -> (grad, hess)`` for
    ``lgb.train(params={"objective": fn}, ...)`` (groups from ``train_data.get_group()``, row
    weights from ``get_weight()``). ``"lightgbm_sklearn"``: ``fn(y_true, y_pred, weight, group)``
    for ``LGBMRanker(objective=fn)``. ``"xgboost"``: ``fn(predt, dtrain) -> (grad, hess)`` for
    ``xgb.train(..., obj=fn)`` (groups from ``dtrain.get_uint_info("group_ptr")``; XGBoost's
    ranking weights are per group). ``on_value``, if given, is called at every call with the
    loss summed over the queries at the scores the library passed (the training objective of
    the model before the tree being grown; see ``grad_hess(return_value=True)``), in the calls
    whose index (counted from ``first_call``) is a multiple of ``value_every`` (None: never); the
    other calls do not compute the value. The loss, its hyperparameters (unknown ones are refused
    here, before any boosting round) and its compiled kernel are resolved once, here, not per
    call. ``n_jobs``: threads of the compiled engine (see :func:`grad_hess`).
    """
    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {BACKENDS}; got {backend!r}")
    if on_value is not None and not callable(on_value):
        raise InputError(f"on_value must be a callable or None; got {type(on_value).__name__}")
    if value_every is not None:
        value_every = int(value_every)
        if value_every < 1:
            raise InputError(f"value_every must be a positive integer or None; got {value_every}")
    sp, hyper, kernel = _resolved(loss, hyper)  # once: every call (boosting round) reuses them
    name = sp.name
    hess_floor = _check_hess_floor(hess_floor)
    calls = [int(first_call)]

    def compute(_fn, scores, labels, off, **kwargs):
        k = calls[0]
        calls[0] += 1
        if on_value is None or value_every is None or k % value_every:
            return _grad_hess(sp, hyper, kernel, scores, labels, off, return_value=False, n_jobs=n_jobs,
                              **{"weights": None, "group_weights": None, **kwargs})
        g, h, value = _grad_hess(sp, hyper, kernel, scores, labels, off, return_value=True, n_jobs=n_jobs,
                                 **{"weights": None, "group_weights": None, **kwargs})
        on_value(value)
        return g, h

    if backend == "lightgbm":
        def lightgbm_objective(preds, train_data):
            group = train_data.get_group()
            if group is None:
                raise InputError(f"{name}: the LightGBM Dataset has no query groups; "
                                 "build it with lgb.Dataset(X, y, group=sizes)")
            off = np.concatenate(([0], np.cumsum(np.asarray(group, dtype=np.int64))))
            return compute(sp.fn, preds, train_data.get_label(), off, weights=train_data.get_weight(),
                           hess_floor=hess_floor)
        lightgbm_objective.__name__ = f"{name}_lightgbm_objective"
        return lightgbm_objective

    if backend == "lightgbm_sklearn":
        def lightgbm_sklearn_objective(y_true, y_pred, weight, group):
            if group is None:
                raise InputError(f"{name}: LGBMRanker.fit needs group=sizes")
            off = np.concatenate(([0], np.cumsum(np.asarray(group, dtype=np.int64))))
            return compute(sp.fn, y_pred, y_true, off, weights=weight, hess_floor=hess_floor)
        return lightgbm_sklearn_objective

    def xgboost_objective(predt, dtrain):
        ptr = np.asarray(dtrain.get_uint_info("group_ptr"), dtype=np.int64)
        n = dtrain.num_row()
        if len(ptr) == 0:
            raise InputError(f"{name}: the XGBoost DMatrix has no query groups; "
                             "build it with xgb.DMatrix(X, y, qid=qid) or set_group(sizes)")
        w = dtrain.get_weight()
        gw = w if w is not None and len(w) == len(ptr) - 1 and len(w) > 0 else None
        return compute(sp.fn, predt, dtrain.get_label(), ptr, group_weights=gw,
                       hess_floor=hess_floor) if n else (np.zeros(0), np.zeros(0))
    return xgboost_objective
