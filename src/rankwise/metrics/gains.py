"""Gain of a relevance grade, and the position discounts used by DCG-type measures."""
from __future__ import annotations

import numpy as np

from rankwise.errors import InputError
from rankwise.metrics import _kernels as K

GAINS = ("exp2", "linear")
DISCOUNTS = {"log2": K.DISC_LOG2, "jarvelin": K.DISC_JARVELIN}


def gain_values(labels, gain) -> np.ndarray:
    """Gain per item: ``"exp2"`` is :math:`2^{y}-1`, ``"linear"`` is :math:`y`, a sequence is a table per grade.

    The numpy form of the rule the kernels apply (validated by :func:`gain_input`); used where a
    gain vector is needed outside a kernel (the NDCG hinge of :mod:`rankwise.losses.structured`).
    """
    y = np.asarray(labels, dtype=np.float64)
    values, tf = gain_input(y, gain, (float(y.min()), float(y.max())) if y.size else (0.0, 0.0))
    out = K.apply_gain(values, tf)
    return out.copy() if out is y else out


def gain_input(y: np.ndarray, gain, label_range) -> tuple:
    """``(values, tf)`` that give a kernel each row's gain (``_kernels._g``), after validation.

    ``"exp2"`` and ``"linear"`` hand over the labels themselves (the kernel applies the gain on
    the rows it visits); a table is looked up here. ``label_range`` is ``(min, max)`` of ``y``.
    """
    lo, hi = label_range
    if isinstance(gain, str):
        if gain not in GAINS:
            raise InputError(f"gain must be 'exp2', 'linear' or a table of gains per grade; got {gain!r}")
        if y.size and lo < 0:
            raise InputError(f"labels must be non-negative for gain={gain!r}; got minimum label {lo:g} "
                             "(shift the labels or pass a gain table)")
        if gain == "exp2":
            if y.size and hi > 1000:
                raise InputError(f"labels too large for gain='exp2' (2^label overflows); got maximum {hi:g}")
            return y, K.G_EXP2
        return y, K.G_VALUE
    try:
        table = np.asarray(gain, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"gain must be 'exp2', 'linear' or a table of gains per grade; got {gain!r:.60}") from None
    if table.ndim != 1 or table.size == 0 or not np.all(np.isfinite(table)):
        raise InputError(f"a gain table must be a non-empty 1-d sequence of finite numbers; got {gain!r:.60}")
    if np.any(table < 0):
        bad = int(np.flatnonzero(table < 0)[0])
        raise InputError(f"a gain table must hold non-negative gains (DCG and its ideal assume them); "
                         f"got gain[{bad}] = {table[bad]:g}")
    if y.size and (np.any(y != np.round(y)) or lo < 0 or hi >= len(table)):
        raise InputError(f"with a gain table of {len(table)} grades, labels must be integers in 0..{len(table) - 1}; "
                         f"got labels in [{lo:g}, {hi:g}]")
    return table[y.astype(np.int64)], K.G_VALUE


def discount_kind(discount) -> int:
    if discount not in DISCOUNTS:
        raise InputError(f"discount must be one of {', '.join(map(repr, DISCOUNTS))}; got {discount!r}")
    return DISCOUNTS[discount]
