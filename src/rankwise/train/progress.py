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
