"""Progress bars for training loops: shown on a terminal, silent otherwise."""
from __future__ import annotations

import sys


def progress_enabled(verbose) -> bool:
    """``verbose="auto"`` shows a bar only when stderr is a terminal; True/False force it."""
    if verbose == "auto":
        return bool(getattr(sys.stderr, "isatty", lambda: False)())
    return bool(verbose)


class Progress:
    """A thin wrapper over :class:`tqdm.tqdm` that does nothing when disabled."""

    def __init__(self, total: int, *, desc: str, verbose="auto", initial: int = 0):
        self._bar = None
        if progress_enabled(verbose):
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=desc, initial=initial, leave=False, dynamic_ncols=True)

    def update(self, n: int = 1, **postfix) -> None:
        if self._bar is not None:
            if postfix:
                self._bar.set_postfix({k: f"{v:.4g}" if isinstance(v, float) else v for k, v in postfix.items()},
                                      refresh=False)
            self._bar.update(n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def pairs_with_progress(make_pairs, labels, offsets, *, verbose="auto", desc: str = "pairs",
                        block_pairs: int = 2_000_000, **kwargs):
    """``make_pairs(labels, offsets, **kwargs)`` run over blocks of queries, with a progress bar.

    Building every pair of long lists can take minutes; this shows how far it got (unit: the
    ``Σ n_q (n_q − 1)`` ordered row pairs examined, counted per block of queries of about
    ``block_pairs`` of them) and, at the end, how many pairs were kept. The result is the same as
    one call: each block gets the same ``offsets`` values (absolute row positions) and the same
    ``numpy.random.Generator`` (built once from ``random_state`` and passed on, so the draws
    follow the same stream in the same query order). ``make_pairs`` must return ``(u, v, y)``
    arrays and accept ``random_state=`` as a seed or Generator (``np.random.default_rng``
    semantics). With the bar off (``verbose`` False/0, or ``"auto"`` without a terminal on
    stderr) it is a single call.
    """
    if not progress_enabled(verbose):
        return make_pairs(labels, offsets, **kwargs)
    import numpy as np

    offsets = np.asarray(offsets, dtype=np.int64)
    if "random_state" in kwargs:
        kwargs["random_state"] = np.random.default_rng(kwargs["random_state"])
    sizes = np.diff(offsets)
    work = sizes * np.maximum(sizes - 1, 0)
    bounds, acc = [0], 0  # query indices where a block ends: about block_pairs row pairs each
    for q, w in enumerate(work.tolist()):
        acc += w
        if acc >= block_pairs:
            bounds.append(q + 1)
            acc = 0
    if bounds[-1] != len(sizes):
        bounds.append(len(sizes))
    parts, kept = [], 0
    with Progress(int(work.sum()), desc=desc, verbose=True) as bar:
        for a, b in zip(bounds[:-1], bounds[1:]):
            u, v, y = make_pairs(labels, offsets[a:b + 1], **kwargs)
            parts.append((u, v, y))
            kept += len(u)
            bar.update(int(work[a:b].sum()), kept=kept)
        if bar._bar is not None and not bar._bar.disable:  # e.g. TQDM_DISABLE=1: say nothing either
            bar._bar.write(f"{desc}: {kept:,} pairs built; fitting the classifier on them", file=sys.stderr)
    if not parts:
        return make_pairs(labels, offsets, **kwargs)
    return tuple(np.concatenate([p[k] for p in parts]) for k in range(3))
