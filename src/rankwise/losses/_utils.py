"""Shared plumbing of every loss: input checks, masking, utilities, reduction.

Every loss takes ``scores`` and ``labels`` as ``[batch, list]`` tensors (a 1-d list is a batch
of one), an optional boolean ``where`` (True = real item), optional ``weights`` (per item
``[batch, list]`` or per list ``[batch]``) and ``reduction`` in ``{"mean", "sum", "none"}``.
Padded items are replaced by zeros *before* any arithmetic (``torch.where``), so neither their
value nor their gradient can leak NaN or inf into the result.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
import os
from dataclasses import dataclass
from typing import Callable

from rankwise.errors import InputError
from rankwise.losses._deferred import deferred

torch = deferred("torch", globals())

REDUCTIONS = ("mean", "sum", "none")

# Exponentials are linearised beyond this argument (see ``safe_exp``): e^50 ~ 5e21 is far from
# the float32 overflow at e^88.7, and a loss that large is already a diverged model.
EXP_CLIP = 50.0


@dataclass
class Batch:
    """Validated, padded input of one loss call."""

    scores: torch.Tensor  # [B, L], masked entries set to 0 (gradient flows to valid ones only)
    labels: torch.Tensor  # [B, L], same dtype as scores, masked entries 0
    mask: torch.Tensor  # [B, L] bool
    item_w: torch.Tensor | None  # [B, L] or None, masked entries 0
    list_w: torch.Tensor | None  # [B] or None
    squeeze: bool  # the caller passed 1-d tensors


def _as_tensor(x, name: str, like: torch.Tensor | None = None) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    try:
        if like is not None:
            return torch.as_tensor(x, dtype=like.dtype if like.is_floating_point() else None,
                                   device=like.device)
        return torch.as_tensor(x)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise InputError(f"{name} must be a tensor or array-like of numbers; {exc}") from None


def prepare(scores, labels, where=None, weights=None, *, loss: str) -> Batch:
    """Check shapes and dtypes once and return the masked padded batch."""
    scores = _as_tensor(scores, f"{loss}: scores")
    if not scores.is_floating_point():
        scores = scores.to(torch.get_default_dtype())
    labels = _as_tensor(labels, f"{loss}: labels", scores)
    squeeze = scores.dim() == 1
    if scores.dim() not in (1, 2):
        raise InputError(f"{loss}: scores must be [batch, list] or a 1-d list; got shape {tuple(scores.shape)}")
    if labels.shape != scores.shape:
        raise InputError(f"{loss}: labels have shape {tuple(labels.shape)} but scores have "
                         f"{tuple(scores.shape)}; they must match")
    if labels.dtype == torch.bool or not labels.is_floating_point():
        labels = labels.to(scores.dtype)
    elif labels.dtype != scores.dtype:
        labels = labels.to(scores.dtype)
    if squeeze:
        scores = scores.unsqueeze(0)
        labels = labels.unsqueeze(0)
    if where is None:
        mask = torch.ones(scores.shape, dtype=torch.bool, device=scores.device)
    else:
        mask = _as_tensor(where, f"{loss}: where")
        if mask.dtype != torch.bool:
            raise InputError(f"{loss}: where must be a boolean mask (True = real item); got dtype {mask.dtype}")
        if squeeze:
            mask = mask.unsqueeze(0) if mask.dim() == 1 else mask
        if mask.shape != scores.shape:
            raise InputError(f"{loss}: where has shape {tuple(mask.shape)} but scores have "
                             f"{tuple(scores.shape) if not squeeze else tuple(scores.shape[1:])}; they must match")
    if not bool(torch.isfinite(torch.where(mask, labels, torch.zeros_like(labels))).all()):
        raise InputError(f"{loss}: labels contain NaN or inf at real (where=True) items")
    if not bool(torch.isfinite(torch.where(mask, scores.detach(), torch.zeros_like(labels))).all()):
        raise InputError(f"{loss}: scores contain NaN or inf at real (where=True) items; "
                         "the model has probably diverged (lower the learning rate)")
    zero = torch.zeros((), dtype=scores.dtype, device=scores.device)
    s = torch.where(mask, scores, zero)
    y = torch.where(mask, labels, zero)
    item_w = list_w = None
    if weights is not None:
        w = _as_tensor(weights, f"{loss}: weights", scores).to(scores.dtype)
        B, L = s.shape
        if squeeze and w.dim() == 1 and w.shape[0] == L:
            item_w = w.unsqueeze(0)
        elif not squeeze and w.dim() == 2 and tuple(w.shape) == (B, L):
            item_w = w
        elif not squeeze and w.dim() == 1 and w.shape[0] == B:
            list_w = w
        elif squeeze and w.dim() == 0:
            list_w = w.reshape(1)
        else:
            raise InputError(f"{loss}: weights must be per item (same shape as scores, "
                             f"{tuple(scores.shape[1:]) if squeeze else (B, L)}) or per list "
                             f"({'a scalar' if squeeze else (B,)}); got shape {tuple(w.shape)}")
        ww = item_w if item_w is not None else list_w
        if not bool(torch.isfinite(ww).all()) or bool((ww < 0).any()):
            raise InputError(f"{loss}: weights must be finite and non-negative")
        if item_w is not None:
            item_w = torch.where(mask, item_w, zero)
    if s.shape[-1] == 0:
        # zero-length lists: one masked slot, so every loss sees a list without a real item
        # (exactly 0, left out of the mean) and the gradient reaches the caller's [B, 0] tensor
        s, y, mask = _pad_one(s, 0.0), _pad_one(y, 0.0), _pad_one(mask, False)
        item_w = None if item_w is None else _pad_one(item_w, 0.0)
    return Batch(s, y, mask, item_w, list_w, squeeze)


def _dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


def _pad_one(t: torch.Tensor, value) -> torch.Tensor:
    return torch.cat([t, torch.full(t.shape[:-1] + (1,), value, dtype=t.dtype, device=t.device)], -1)


def reduce(per_list: torch.Tensor, valid: torch.Tensor, batch: Batch, reduction: str, *, loss: str):
    """Apply list weights and the reduction; lists without a valid item (or pair) give exactly 0.

    Inputs are finite (checked by :func:`prepare`), so a non-finite value can only come from
    exceeding the floating-point range (huge utilities or scores): refused with a message
    rather than returned."""
    if reduction not in REDUCTIONS:
        raise InputError(f"{loss}: reduction must be one of {REDUCTIONS}; got {reduction!r}")
    per_list = torch.where(valid, per_list, torch.zeros_like(per_list))
    if batch.list_w is not None:
        per_list = per_list * batch.list_w
    if not bool(torch.isfinite(per_list.detach()).all()):
        y, s = batch.labels[batch.mask], batch.scores.detach()[batch.mask]
        raise InputError(f"{loss}: the loss value overflows {_dtype_name(per_list)} (largest |label| "
                         f"{float(y.abs().max()):g}, largest |score| {float(s.abs().max()):g}); rescale the labels "
                         "or the scores" + ("" if per_list.dtype == torch.float64 else ", or compute in float64"))
    if reduction == "none":
        return per_list[0] if batch.squeeze else per_list
    total = per_list.sum()
    if reduction == "sum":
        return total
    n = valid.sum()
    return total / n.clamp(min=1).to(total.dtype)


def _proc_kb(path: str, key: str) -> float | None:
    """The ``key:`` value (kB) of a /proc file such as /proc/meminfo, in bytes; None when absent."""
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return float(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_headroom() -> float | None:
    """Bytes this process's memory cgroup (v2 ``memory.max``, v1 ``memory.limit_in_bytes``) still allows."""
    for limit, usage in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                         ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                          "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit) as fh:
                raw = fh.read().strip()
            if raw == "max" or float(raw) >= 2 ** 60:
                continue
            with open(usage) as fh:
                return max(0.0, float(raw) - float(fh.read().strip()))
        except (OSError, ValueError):
            continue
    return None


def _memory_bytes() -> float:
    """Bytes this process can still allocate: the least of the machine's available memory
    (``MemAvailable``, else its physical memory), the address-space limit (``RLIMIT_AS``, as set by
    ``ulimit -v`` / ``prlimit --as``) less the address space in use, and the memory cgroup's
    headroom. A pair form larger than this is refused before it is allocated, instead of failing
    with a MemoryError half-way or drawing the OOM killer."""
    have = []
    avail = _proc_kb("/proc/meminfo", "MemAvailable")
    if avail is None:
        try:
            avail = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
            avail = 16e9
    have.append(avail)
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            used = _proc_kb("/proc/self/status", "VmSize") or 0.0
            have.append(max(0.0, float(soft) - used))
    except (ImportError, OSError, ValueError):  # pragma: no cover - non-POSIX
        pass
    cg = _cgroup_headroom()
    if cg is not None:
        have.append(cg)
    return min(have)


def check_pair_memory(b: Batch, loss: str, *, copies: int = 8) -> None:
    """Refuse, before any allocation, a dense [batch, L, L] pair form that cannot fit in memory
    (``copies`` pair matrices of the batch's dtype alive at once), naming the loss, the list
    length and what to use instead; so is one whose lists have more pairs than the pair budget
    (:func:`pair_budget`)."""
    B, L = b.scores.shape
    need = float(copies) * B * L * L * b.scores.element_size()
    have = _memory_bytes()
    if need > have:
        raise InputError(f"{loss}: the dense pair form of {B} list(s) of {L} items needs about {need / 1e9:.3g} GB, "
                         f"more than the {have / 1e9:.3g} GB this process can still allocate (available memory, "
                         "address-space and cgroup limits); train through the compiled engine "
                         "(rankwise.losses.grad_hess / training_loss), use method='auto' where the loss has a "
                         "sort-based form, or split the lists")
    budget = pair_budget()
    if L * (L - 1) // 2 > budget:
        lengths = b.mask.sum(-1)
        q = int(lengths.argmax())
        raise pair_budget_error(loss, f"list {q} of the batch", int(lengths[q]), L * (L - 1) // 2, budget,
                                f"the dense pair form: every pair of the {L:,} padded items")


#: pairs one query may visit in one call of a pair loss, unless :func:`max_pairs` or ``RANKWISE_MAX_PAIRS`` say
#: otherwise: a few seconds of the compiled engine per query and call (measured ~3-4 ns a pair in the logistic loop
#: on one core, ~40-50 ns in the general loop; a query of ~55,000 documents with 3 label levels), so that a query
#: of 10^6 documents (~3·10^11 pairs: ~20 min per gradient) is refused up front instead of looking like a hang.
DEFAULT_MAX_PAIRS = 10 ** 9

_MAX_PAIRS = contextvars.ContextVar("rankwise_max_pairs", default=None)


def _parse_max_pairs(value, name: str) -> float:
    """A pair budget: a positive whole number, or None / inf / "inf" / "none" for no limit."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("inf", "none", "unlimited")):
        return math.inf
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if not (v >= 1 and (math.isinf(v) or v == int(v))):
        raise InputError(f"{name} must be a positive whole number of pairs, or None / 'inf' for no limit; "
                         f"got {value!r}")
    return v


def pair_budget() -> float:
    """The pairs one query may visit in one call: the innermost :func:`max_pairs`, else ``RANKWISE_MAX_PAIRS``
    when set, else :data:`DEFAULT_MAX_PAIRS` (``math.inf``: no limit)."""
    v = _MAX_PAIRS.get()
    if v is not None:
        return v
    env = os.environ.get("RANKWISE_MAX_PAIRS", "").strip()
    return _parse_max_pairs(env, "RANKWISE_MAX_PAIRS") if env else float(DEFAULT_MAX_PAIRS)


@contextlib.contextmanager
def max_pairs(limit):
    """Let one query visit up to ``limit`` pairs per call of a pair loss in the block (None or ``math.inf``: no
    limit), instead of :data:`DEFAULT_MAX_PAIRS` (or ``RANKWISE_MAX_PAIRS``). A query over the budget is refused
    with an :class:`~rankwise.errors.InputError` before any work: by the compiled engine (``grad_hess``,
    ``training_loss``, the models that train on them) and by the dense torch pair forms."""
    token = _MAX_PAIRS.set(_parse_max_pairs(limit, "max_pairs"))
    try:
        yield
    finally:
        _MAX_PAIRS.reset(token)


def pair_budget_error(loss: str, query: str, n: int, pairs: int, budget: float, what: str) -> InputError:
    """The error of a query over the pair budget: the loss, the query, its size and pair count, what to do."""
    return InputError(f"{loss}: {query} has {n:,} documents, so one call visits {pairs:,} pairs ({what}), more "
                      f"than the pair budget of {budget:,.0f} per query (at least ~{pairs * 3e-9:,.0f} s per call at "
                      "~3 ns a pair on one core); set a truncation level (truncation_level=50 visits at most "
                      "50·n pairs), use a listwise loss (listnet, listmle) or a sort-based form (pairwise_hinge, "
                      "rankboost, kendall_hinge with pair_weights 'none'/'delta_label' and method='auto'), split the "
                      "query, or raise the budget with rankwise.losses.max_pairs(N) (a context manager; None: no "
                      "limit) or the environment variable RANKWISE_MAX_PAIRS=N")


def exp2_gain(labels: torch.Tensor, *, loss: str) -> torch.Tensor:
    """The DCG gain ``2^y - 1``; a label whose gain overflows the dtype is refused, naming it
    (2^y is finite for y < 1024 in float64 and y < 128 in float32)."""
    g = torch.exp2(labels) - 1
    if not bool(torch.isfinite(g).all()):
        bad = float(labels[~torch.isfinite(g)].max())
        limit = math.ceil(math.log2(torch.finfo(labels.dtype).max))
        raise InputError(f"{loss}: label {bad:g} overflows the exp2 gain 2^y - 1 in {_dtype_name(labels)} "
                         f"(labels must be < {limit}); use the linear gain/utility or rescale the labels"
                         + ("" if labels.dtype == torch.float64 else ", or compute in float64"))
    return g


def scaled_gains(g: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Gains divided by each list's largest gain: NDCG-type ratios are unchanged and no DCG sum
    can overflow however large the gains (lists whose gains are all <= 0 are left as they are)."""
    top = torch.where(mask, g, torch.zeros_like(g)).max(-1, keepdim=True).values.detach()
    return g / torch.where(top > 0, top, torch.ones_like(top))


def utility(labels: torch.Tensor, u, *, loss: str) -> torch.Tensor:
    """Map labels ``y`` to utilities ``v = u(y)``: ``"linear"`` (v = y), ``"exp2"`` (v = 2^y - 1),
    or a callable taking and returning a tensor of the same shape."""
    if u == "linear" or u is None:
        return labels
    if u == "exp2":
        return exp2_gain(labels, loss=loss)
    if callable(u):
        v = u(labels)
        if not isinstance(v, torch.Tensor) or v.shape != labels.shape:
            raise InputError(f"{loss}: utility callable must return a tensor of shape {tuple(labels.shape)}")
        return v.to(labels.dtype)
    raise InputError(f"{loss}: utility must be 'linear', 'exp2' or a callable; got {u!r}")


def check_positive(value, name: str, loss: str, *, allow_zero: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{loss}: {name} must be a number; got {value!r}") from None
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise InputError(f"{loss}: {name} must be {'non-negative' if allow_zero else 'positive'} and finite; got {value!r}")
    return v


def check_choice(value, name: str, choices, loss: str):
    if isinstance(value, str) and value in choices:
        return value
    raise InputError(f"{loss}: {name} must be one of {tuple(choices)}; got {value!r}")


def safe_exp(t: torch.Tensor) -> torch.Tensor:
    """``exp(t)`` for ``t <= EXP_CLIP``, continued linearly (value and slope match) above.

    Convex, C^1 and finite for any finite input, so exponential losses stay finite for scores
    up to +-1e4; below the threshold it is the exact exponential.
    """
    c = torch.as_tensor(EXP_CLIP, dtype=t.dtype, device=t.device)
    tc = torch.minimum(t, c)
    e = torch.exp(tc)
    return e * (1 + (t - tc))


def log2p1(x: torch.Tensor) -> torch.Tensor:
    """Discount denominator log2(1 + x)."""
    return torch.log2(1 + x)


def gains(labels: torch.Tensor, gain, *, loss: str = "gains") -> torch.Tensor:
    if gain == "exp2":
        return exp2_gain(labels, loss=loss)
    if gain == "linear":
        return labels
    if callable(gain):
        return gain(labels)
    raise InputError(f"{loss}: gain must be 'exp2', 'linear' or a callable; got {gain!r}")


def ideal_dcg(g: torch.Tensor, mask: torch.Tensor, k: int | None = None) -> torch.Tensor:
    """max DCG@k of each list: gains sorted descending, discount 1/log2(1+rank)."""
    gs = torch.where(mask, g, torch.full_like(g, -math.inf)).sort(dim=-1, descending=True).values
    gs = torch.where(torch.isfinite(gs), gs, torch.zeros_like(gs))
    L = g.shape[-1]
    ranks = torch.arange(1, L + 1, dtype=g.dtype, device=g.device)
    disc = 1.0 / log2p1(ranks)
    if k is not None:
        disc = torch.where(ranks <= k, disc, torch.zeros_like(disc))
    return (gs * disc).sum(-1)


def ranks_from_scores(s: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """1-based rank of each item by descending score (stable: input order breaks ties), detached."""
    sd = torch.where(mask, s.detach(), torch.full_like(s, -math.inf))
    order = torch.sort(sd, dim=-1, descending=True, stable=True).indices
    ranks = torch.empty_like(order)
    ar = torch.arange(1, s.shape[-1] + 1, device=s.device).expand_as(order)
    ranks.scatter_(-1, order, ar)
    return ranks.to(s.dtype)


LossFn = Callable[..., "torch.Tensor"]
