"""Optimisers shared by the models.

- :class:`AveragedOGD`: projected online gradient descent with step ``eta / sqrt(t)`` and the
  online-to-batch average of the iterates (Chaudhuri & Tewari 2015, Thm 5).
- :func:`minimize_erm`: regularised empirical risk minimisation by L-BFGS, with an ℓ1 term
  handled exactly through the split ``w = u - v``, ``u, v >= 0`` (L-BFGS-B with bounds).
- minibatch Adam over queries is ``torch.optim.Adam`` driven by :func:`rankwise.train.loop.run_epochs`.
"""
from __future__ import annotations

import math

import numpy as np


def _torch():
    import torch

    return torch


def make_averaged_ogd(params, *, lr: float, radius: float | None = None):
    """Projected OGD with iterate averaging (a ``torch.optim.Optimizer``).

    .. math::

        w_{t+1} = \\Pi_{\\|w\\|_2 \\le W}\\bigl(w_t - \\tfrac{\\eta}{\\sqrt t} \\nabla \\ell_t(w_t)\\bigr),
        \\qquad \\bar w_T = \\frac1T \\sum_{t=1}^T w_t

    On i.i.d. queries and a convex loss that is :math:`G`-Lipschitz, the averaged iterate has
    excess risk :math:`O(W G / \\sqrt T)` (online-to-batch conversion). ``radius`` is
    :math:`W` (None: no projection). ``swap_average()`` exchanges the current and the averaged
    parameters (call it before predicting and again to continue training).

    References
    ----------
    S. Chaudhuri and A. Tewari. Generalization error bounds for learning to rank: does the length
    of document lists matter? ICML 2015, Theorem 5.
    """
    torch = _torch()

    class AveragedOGD(torch.optim.Optimizer):
        def __init__(self, params, lr, radius):
            super().__init__(params, {"lr": lr, "radius": radius})

        @torch.no_grad()
        def step(self, closure=None):
            loss = None if closure is None else closure()
            for group in self.param_groups:
                params = [p for p in group["params"]]
                st0 = self.state[params[0]]
                t = int(st0.get("t", 0)) + 1
                eta = group["lr"] / math.sqrt(t)
                for p in params:
                    if p.grad is not None:
                        p.add_(p.grad, alpha=-eta)
                if group["radius"] is not None:
                    norm = torch.sqrt(sum((p * p).sum() for p in params))
                    if norm > group["radius"]:
                        for p in params:
                            p.mul_(group["radius"] / norm)
                for p in params:
                    st = self.state[p]
                    if "avg" not in st:
                        st["avg"] = p.detach().clone()
                    else:  # running mean of w_1..w_t
                        st["avg"].add_(p - st["avg"], alpha=1.0 / t)
                    st["t"] = t
            return loss

        @torch.no_grad()
        def swap_average(self):
            for group in self.param_groups:
                for p in group["params"]:
                    st = self.state[p]
                    if "avg" in st:
                        tmp = p.detach().clone()
                        p.copy_(st["avg"])
                        st["avg"].copy_(tmp)

    return AveragedOGD(params, lr, radius)


#: the L-BFGS-B state arrays (scipy's own workspace) a checkpoint carries, with the loop's counters
_LBFGSB_ARRAYS = ("x", "f", "g", "wa", "iwa", "task", "ln_task", "lsave", "isave", "dsave", "counts")
_NEW_X, _FG, _STOP = 1, 3, 5
_MAXCOR, _MAXLS, _MAXFUN = 10, 20, 15000  # scipy's L-BFGS-B defaults


def _setulb():
    """scipy's reverse-communication L-BFGS-B step (scipy >= 1.15: the C translation), or None."""
    try:
        from scipy.optimize import _lbfgsb
    except ImportError:  # pragma: no cover - depends on the installed scipy
        return None
    fn = getattr(_lbfgsb, "setulb", None)
    doc = getattr(fn, "__doc__", "") or ""
    return fn if "ln_task" in doc else None


def _lbfgsb(fun_grad, x0, bounds, opts, callback, state, state_out):
    """Drive scipy's L-BFGS-B step by step, so that its complete state can be saved and continued.

    The same iterates as ``scipy.optimize.minimize(method="L-BFGS-B")`` (the same ``setulb`` calls
    with the same ``f`` and ``g``), but the loop is ours: at every new iterate the whole state —
    the point, its objective and gradient, the workspace holding the correction pairs (s, y), the
    middle matrix, theta and the line search's saved scalars, the task codes and the iteration and
    evaluation counters — is copied into ``state_out`` before ``callback`` runs. ``state`` (such a
    copy) continues a run exactly where it was taken: the same later iterates, bit for bit.
    """
    from scipy.optimize import OptimizeResult

    setulb = _setulb()
    n = len(x0)
    m = _MAXCOR
    lower = np.zeros(n)
    upper = np.zeros(n)
    nbd = np.zeros(n, np.int32)
    if bounds is not None:
        for i, (lo, hi) in enumerate(bounds):
            has_lo, has_hi = lo is not None and np.isfinite(lo), hi is not None and np.isfinite(hi)
            lower[i], upper[i] = (lo if has_lo else 0.0), (hi if has_hi else 0.0)
            nbd[i] = {(False, False): 0, (True, False): 1, (True, True): 2, (False, True): 3}[has_lo, has_hi]
    maxiter, factr, pgtol = int(opts["maxiter"]), opts["ftol"] / np.finfo(float).eps, opts["gtol"]
    if state is None:
        x = np.array(x0, dtype=np.float64)
        if bounds is not None:
            x = np.clip(x, np.where(nbd % 3 != 0, lower, -np.inf), np.where(nbd >= 2, upper, np.inf))
        f, g = np.array(0.0), np.zeros(n)
        wa = np.zeros(2 * m * n + 5 * n + 11 * m * m + 8 * m)
        iwa, task, ln_task = np.zeros(3 * n, np.int32), np.zeros(2, np.int32), np.zeros(2, np.int32)
        lsave, isave, dsave = np.zeros(4, np.int32), np.zeros(44, np.int32), np.zeros(29)
        nit = nfev = 0
        halted = False
    else:
        x, f, g, wa, iwa, task, ln_task, lsave, isave, dsave = (np.array(state[k]) for k in _LBFGSB_ARRAYS[:-1])
        f = float(f)
        nit, nfev, halted = (int(v) for v in state["counts"])
        if task[0] != _NEW_X:  # a run the algorithm ended itself (converged, or could not go on)
            return x, OptimizeResult(x=x, fun=f, jac=g, nit=nit, nfev=nfev, status=0 if task[0] == 4 else 2,
                                     state=state)
    snapshot = {}

    def take(flag=0):
        snapshot.clear()
        snapshot.update(x=x.copy(), f=np.array(f, dtype=np.float64), g=np.array(g, dtype=np.float64),
                        wa=wa.copy(), iwa=iwa.copy(), task=task.copy(), ln_task=ln_task.copy(), lsave=lsave.copy(),
                        isave=isave.copy(), dsave=dsave.copy(), counts=np.array([nit, nfev, flag], np.int64))
        if state_out is not None:
            state_out.clear()
            state_out.update(snapshot)

    def stop_checks():  # scipy's order: a callback's halt, then max_iter, then the evaluation budget
        if halted:
            task[:] = (_STOP, 505)
        if nit >= maxiter:
            task[:] = (_STOP, 504)
        elif nfev > _MAXFUN:
            task[:] = (_STOP, 502)

    if state is not None:  # continue right after the callback of the saved iterate
        stop_checks()
    while True:
        g = np.asarray(g, dtype=np.float64)
        setulb(m, x, lower, upper, nbd, f, g, factr, pgtol, wa, iwa, task, lsave, isave, dsave, _MAXLS, ln_task)
        if task[0] == _FG:
            f, g = fun_grad(x.copy())
            nfev += 1
        elif task[0] == _NEW_X:
            nit += 1
            take()
            if callback is not None:
                try:
                    callback(x, float(f))
                except StopIteration:
                    halted = True
                    snapshot["counts"][2] = 1
                    if state_out is not None:
                        state_out["counts"] = snapshot["counts"].copy()
            stop_checks()
        else:
            break
    if task[0] == 4:
        status = 0
    elif nfev > _MAXFUN or nit >= maxiter:
        status = 1
    else:
        status = 99 if halted else 2
    # a run the algorithm ended itself continues from its final state; one stopped from outside
    # (max_iter, a callback) from its last iterate, where the stop is decided again on resume
    final = snapshot if task[0] == _STOP and snapshot else None
    if final is None:
        take()
        final = dict(snapshot)
    return x, OptimizeResult(x=x, fun=float(f), jac=g, nit=nit, nfev=nfev, status=status, state=final)


def minimize_erm(fun_grad, x0: np.ndarray, *, l1: float = 0.0, l1_mask: np.ndarray | None = None,
                 max_iter: int = 200, tol: float = 1e-6, callback=None, state: dict | None = None,
                 state_out: dict | None = None):
    """Minimise ``f(w) + l1 * ||w[l1_mask]||_1`` with L-BFGS(-B); ``fun_grad(w) -> (f, grad)``.

    ``f`` already holds the smooth part (risk + ℓ2). For ``l1 > 0`` the problem is solved exactly
    as the smooth bound-constrained problem over ``w = u - v`` with ``u, v >= 0`` (the ℓ1 term
    becomes the linear ``l1 * sum(u + v)``), so coefficients reach exact zeros.
    ``callback(w, f)`` is called after each iteration with the iterate and the objective value of
    the optimiser's last evaluation there (ℓ1 term included; no extra evaluation); it may raise
    StopIteration (then ``res.status == 99``). Returns ``(w, scipy OptimizeResult)``;
    ``res.status == 1`` means ``max_iter`` was reached before convergence.

    Exact continuation: ``state_out`` (a dict) receives, before each ``callback`` call, the
    complete L-BFGS-B state at that iterate (numpy arrays: ``_LBFGSB_ARRAYS``), and
    ``res.state`` holds the state the run ended in. Passed back as ``state`` (with the same
    ``fun_grad``, ``l1`` and ``tol``), it continues the run as if it had never stopped: the same
    iterates bit for bit, ``max_iter`` counting the iterations before the state too. Where the
    installed scipy has no step-wise L-BFGS-B (before 1.15) ``res.state`` is None and a run
    restarts from ``x0``.
    """
    from scipy.optimize import minimize

    x0 = np.asarray(x0, dtype=np.float64)
    d = len(x0)
    opts = {"maxiter": int(max_iter), "gtol": tol, "ftol": tol * 1e-3}
    stepwise = _setulb() is not None
    if l1 <= 0:
        if stepwise:
            return _lbfgsb(fun_grad, x0, None, opts, callback, state, state_out)

        def cb(intermediate_result):  # this parameter name selects scipy's OptimizeResult callback
            callback(intermediate_result.x, float(intermediate_result.fun))
        res = minimize(fun_grad, x0, jac=True, method="L-BFGS-B", options=opts,
                       callback=None if callback is None else cb)
        res.state = None
        return res.x, res
    mask = np.ones(d, dtype=bool) if l1_mask is None else np.asarray(l1_mask, dtype=bool)
    pen = np.where(mask, l1, 0.0)

    def split_fg(z):
        w = z[:d] - z[d:]
        f, g = fun_grad(w)
        return f + float(pen @ (z[:d] + z[d:])), np.concatenate((g + pen, -g + pen))

    z0 = np.concatenate((np.maximum(x0, 0), np.maximum(-x0, 0)))
    bounds = [(0, None) if m else (None, None) for m in mask] * 2
    # unpenalised coordinates (the intercept) stay free in u; pin their v copy at 0
    bounds = bounds[:d] + [(0, None) if m else (0, 0) for m in mask]

    def split_cb(z, f):
        callback(z[:d] - z[d:], f)
    if stepwise:
        z, res = _lbfgsb(split_fg, z0, bounds, opts, None if callback is None else split_cb, state, state_out)
        return z[:d] - z[d:], res
    res = minimize(split_fg, z0, jac=True, method="L-BFGS-B", bounds=bounds, options=opts,
                   callback=None if callback is None else (lambda r: split_cb(r.x, float(r.fun))))
    res.state = None
    return res.x[:d] - res.x[d:], res
