"""The compiled engine as a torch loss: :func:`training_loss` has the loss signature, runs the
loss's kernel on CPU tensors through a ``torch.autograd.Function`` (the backward is the kernel's
gradient times the incoming per-list gradient: pair weights such as ΔNDCG are constants of the
step, so nothing else is needed), and falls back to the torch form where there is no kernel
(a callable utility or gain, a sort-based form) or the scores live on a GPU.
"""
from __future__ import annotations

import functools

import numpy as np

from rankwise.errors import InputError
from rankwise.losses import _engine
from rankwise.losses._deferred import deferred
from rankwise.losses._utils import REDUCTIONS, prepare
from rankwise.losses.registry import check_hyper, get, spec

torch = deferred("torch", globals())


@functools.cache
def _engine_function():
    """The ``torch.autograd.Function`` of the engine, built on first use (torch is imported then)."""

    class _EngineFunction(torch.autograd.Function):
        """Per-list values of one kernel on flat scores; backward: kernel gradient × dL/dvalue."""

        @staticmethod
        def forward(ctx, s_flat, y_flat, w_flat, offsets, kernel, n_jobs, loss):
            s = s_flat.detach().to(torch.float64).cpu().numpy()
            vals, ok, g, _ = _engine.run(kernel, s, y_flat, offsets, w_flat, n_jobs, loss=loss)
            ctx.save_for_backward(torch.from_numpy(g))
            ctx.row_list = torch.from_numpy(np.repeat(np.arange(len(offsets) - 1), np.diff(offsets)))
            ok = torch.from_numpy(ok)
            ctx.mark_non_differentiable(ok)
            return torch.from_numpy(vals).to(s_flat.dtype), ok

        @staticmethod
        def backward(ctx, grad_vals, _grad_ok):
            g, = ctx.saved_tensors
            gs = g * grad_vals.detach().to(torch.float64)[ctx.row_list]
            return gs.to(grad_vals.dtype), None, None, None, None, None, None

    return _EngineFunction


def training_loss(loss, scores, labels, *, where=None, weights=None, reduction="mean", n_jobs=None, **hyper):
    """``loss(scores, labels, where=..., weights=..., reduction=..., **hyper)`` computed by the
    compiled engine on CPU: the same value and gradient as the torch form (to rounding), with
    O(n) memory instead of O(L²) for the pair losses. Falls back to the torch form where the
    loss has no kernel for these hyperparameters or the scores are not on the CPU.

    ``n_jobs``: engine threads (None: every CPU this process may use); the result does not
    depend on it.
    """
    sp = spec(get(loss) if isinstance(loss, str) else loss)
    hyper = check_hyper(sp.fn, hyper, loss=sp.name, param="**hyper")
    kernel = sp.kernel(hyper) if sp.kernel is not None else None
    s_t = scores if isinstance(scores, torch.Tensor) else None
    if kernel is None or (s_t is not None and s_t.device.type != "cpu"):
        return sp.fn(scores, labels, where=where, weights=weights, reduction=reduction, **hyper)
    if reduction not in REDUCTIONS:
        raise InputError(f"{sp.name}: reduction must be one of {REDUCTIONS}; got {reduction!r}")
    b = prepare(scores, labels, where, weights, loss=sp.name)
    mask = b.mask
    lengths = mask.sum(-1).numpy().astype(np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    s_flat = b.scores[mask]
    y_flat = b.labels[mask].detach().to(torch.float64).numpy()
    w_flat = None if b.item_w is None else b.item_w[mask].detach().to(torch.float64).numpy()
    per_list, valid = _engine_function().apply(s_flat, y_flat, w_flat, offsets, kernel, n_jobs, sp.name)
    per_list = torch.where(valid, per_list, torch.zeros_like(per_list))
    if b.list_w is not None:
        per_list = per_list * b.list_w
    if not bool(torch.isfinite(per_list.detach()).all()):
        raise InputError(f"{sp.name}: the loss value overflows {str(per_list.dtype).replace('torch.', '')} (largest "
                         f"|label| {float(np.abs(y_flat).max()):g}); rescale the labels or the scores")
    if reduction == "none":
        return per_list[0] if b.squeeze else per_list
    total = per_list.sum()
    if reduction == "sum":
        return total
    return total / valid.sum().clamp(min=1).to(total.dtype)


def compiled(loss):
    """``training_loss`` bound to one loss: a drop-in replacement for the loss function (same
    signature) that trains on the compiled engine on CPU."""
    sp = spec(get(loss) if isinstance(loss, str) else loss)
    fn = functools.partial(training_loss, sp.name)
    functools.update_wrapper(fn, sp.fn)
    return fn
