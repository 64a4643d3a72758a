"""Errors raised at rankwise's public boundary.

Every message says what was expected, what came, and (where one exists) the fix.
Parse errors carry ``path:line`` so the user can open the offending line.
"""
from __future__ import annotations


class RankwiseError(Exception):
    """Base class of every error rankwise raises on purpose."""


class InputError(RankwiseError, ValueError):
    """A parameter or array given by the user is not what the function takes."""


class ParseError(InputError):
    """A data file is malformed; the message starts with ``path:line:``."""

    def __init__(self, path, line: int | None, message: str):
        self.path = str(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


#: the name issue 17 uses for "a data file breaks its format's rules": the same class as ParseError
DataFormatError = ParseError


def _not_fitted_error():
    # scikit-learn's NotFittedError is a base (so sklearn.utils.validation.check_is_fitted users
    # and meta-estimators catch ours), built on first use: importing sklearn costs ~1 s, and
    # rankwise.data / rankwise.metrics must stay light.
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError

    class NotFittedError(RankwiseError, SklearnNotFittedError):
        """A model was used before ``fit`` (a scikit-learn ``NotFittedError`` too)."""

    NotFittedError.__module__ = __name__
    return NotFittedError


def __getattr__(name):
    if name == "NotFittedError":
        cls = globals()["NotFittedError"] = _not_fitted_error()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class TrainingDivergedError(RankwiseError, FloatingPointError):
    """Training produced a non-finite loss or gradient (lower the learning rate, standardise X)."""


class WriteError(InputError, OSError):
    """A file could not be written (disk full, read-only folder, no permission...).

    The message names the target path and the reason; ``errno`` is the system's. Nothing was
    written under the target name: a previous file there is unchanged (see ``rankwise._io``).
    An ``InputError`` too (the path given cannot take the file) and an ``OSError``.
    """

    def __str__(self) -> str:  # the message, not OSError's "[Errno n] strerror: filename"
        return str(self.args[0]) if self.args else ""


class DataNotFoundError(RankwiseError, FileNotFoundError):
    """A data set is neither in the cache nor downloadable (offline)."""


class WorkerLostError(RankwiseError, RuntimeError):
    """A distributed computation lost a worker (killed, out of memory, disconnected) at a point where it
    cannot go on without it, or did not finish within its ``timeout``; nothing partial is returned."""


class UntrainedModelWarning(UserWarning):
    """``fit`` ended with a model that ranks like a constant scorer (every document of every training
    query scored alike) or whose parameters never left their start: its scores carry no ranking."""


class UntrainedModelError(RankwiseError):
    """``rankwise train`` got a model that fit left untrained (see :class:`UntrainedModelWarning`) and
    was not told to save it anyway (``--allow-untrained``)."""
