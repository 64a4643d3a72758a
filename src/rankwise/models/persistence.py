"""Saving and loading rankers without pickle: one ``.npz`` file holding JSON metadata and arrays.

File format (``format_version`` 1)
----------------------------------
A model file is a NumPy ``.npz`` archive (a zip of ``.npy`` arrays) written and read with
``allow_pickle=False``, so loading a file never runs code. It holds

- ``__meta__``: a ``uint8`` array with UTF-8 JSON::

      {"format": "rankwise-model", "format_version": 1, "rankwise_version": "0.1.0",
       "kind": "model" | "checkpoint", "class": "LinearRanker",
       "params": {...constructor arguments...}, "state": {...fitted scalars...},
       "train_state": {...}   # checkpoints only
      }

- one entry per array of the model's state (numeric arrays only; object arrays are refused).
  Text blobs such as a LightGBM/XGBoost model string are stored as ``uint8`` arrays.

A file whose ``format_version`` is newer than :data:`FORMAT_VERSION` is refused with a message
that says which rankwise version is needed; an unknown ``class`` is refused too (the class is
looked up in :data:`MODEL_REGISTRY`, never imported by name).

Protocol for a model class
--------------------------
Every subclass of :class:`rankwise.models.base.BaseRanker` is registered here under its class
name automatically. To be saveable it implements two methods::

    def _get_state(self) -> tuple[dict, dict[str, np.ndarray]]:
        # JSON-able fitted scalars (ints, floats, strings, lists, dicts) and named numeric arrays
        return {"n_features_in_": self.n_features_in_}, {"coef_": self.coef_}

    def _set_state(self, state: dict, arrays: dict[str, np.ndarray]) -> None:
        # called on a fresh instance built from the saved constructor params
        self.n_features_in_ = state["n_features_in_"]
        self.coef_ = arrays["coef_"]

Constructor parameters are saved from ``get_params(deep=False)``; they must be JSON-able
(tuples are kept as tuples). A class whose parameters are not (e.g. a scikit-learn estimator
passed as a parameter) overrides ``_get_params_state()`` / ``_params_from_state(params)``.
"""
from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np

from rankwise.errors import InputError

FORMAT = "rankwise-model"
FORMAT_VERSION = 1

#: Model classes that :func:`load` may build, by class name. Filled by ``BaseRanker.__init_subclass__``.
MODEL_REGISTRY: dict[str, type] = {}


def register_model(cls: type) -> type:
    """Register ``cls`` under its class name (done automatically for BaseRanker subclasses)."""
    MODEL_REGISTRY[cls.__name__] = cls
    return cls


# -- JSON encoding of parameters (tuples survive the round trip) ------------------------------

def _encode(value, *, where: str):
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if not np.isfinite(v):
            return {"__float__": repr(v)}
        return v
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(v, where=f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [_encode(v, where=f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise InputError(f"cannot save {where}: dictionary key {k!r} is not a string")
            out[k] = _encode(v, where=f"{where}[{k!r}]")
        return out
    raise InputError(f"cannot save {where}: value of type {type(value).__name__} is not JSON-able; "
                     "only None, bool, int, float, str, list, tuple and dict can be saved")


def _decode(value):
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"__tuple__"}:
            return tuple(_decode(v) for v in value["__tuple__"])
        if set(value) == {"__float__"}:
            return float(value["__float__"])
        return {k: _decode(v) for k, v in value.items()}
    return value


def text_to_array(text: str) -> np.ndarray:
    """Store a text blob (e.g. a GBDT model string) as a ``uint8`` array."""
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).copy()


def array_to_text(arr: np.ndarray) -> str:
    return np.asarray(arr, dtype=np.uint8).tobytes().decode("utf-8")


# -- writing / reading ------------------------------------------------------------------------

def _write(path, meta: dict, arrays: dict[str, np.ndarray]) -> Path:
    path = Path(os.fspath(path))
    out = {}
    for name, arr in arrays.items():
        if name == "__meta__":
            raise InputError("array name '__meta__' is reserved")
        a = np.asarray(arr)
        if a.dtype.kind not in "biuf":
            raise InputError(f"cannot save array {name!r}: dtype {a.dtype} is not numeric")
        out[name] = a
    blob = json.dumps(meta, allow_nan=False, sort_keys=True).encode("utf-8")
    out["__meta__"] = np.frombuffer(blob, dtype=np.uint8)
    if path.parent and not path.parent.exists():
        raise InputError(f"cannot save to {path}: directory {path.parent} does not exist")
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:  # a file handle: numpy must not append '.npz' to the name
        np.savez(fh, **out)
    os.replace(tmp, path)  # atomic: a crash while writing a checkpoint keeps the previous one
    return path


def _read(path) -> tuple[dict, dict[str, np.ndarray]]:
    path = Path(os.fspath(path))
    if not path.is_file():
        raise InputError(f"cannot load {path}: no such file")
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except InputError:
        raise
    except Exception as exc:  # zip / npy errors: say what the file should be
        raise InputError(f"cannot load {path}: not a rankwise model file ({type(exc).__name__}: {exc})") from None
    if "__meta__" not in arrays:
        raise InputError(f"cannot load {path}: not a rankwise model file (no '__meta__' entry)")
    try:
        meta = json.loads(arrays.pop("__meta__").tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot load {path}: corrupt metadata ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise InputError(f"cannot load {path}: not a rankwise model file (format {meta.get('format')!r})"
                         if isinstance(meta, dict) else f"cannot load {path}: corrupt metadata")
    version = meta.get("format_version")
    if not isinstance(version, int):
        raise InputError(f"cannot load {path}: format_version missing or not an integer")
    if version > FORMAT_VERSION:
        raise InputError(f"cannot load {path}: it was written with model format version {version} "
                         f"(rankwise {meta.get('rankwise_version', '?')}), but this rankwise reads "
                         f"versions up to {FORMAT_VERSION}; upgrade rankwise to load it")
    return meta, arrays


def _model_meta(model, kind: str) -> tuple[dict, dict]:
    from rankwise import __version__

    state, arrays = model._get_state()
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "rankwise_version": __version__,
        "kind": kind,
        "class": type(model).__name__,
        "params": _encode(model._get_params_state(), where=f"{type(model).__name__} parameters"),
        "state": _encode(state, where=f"{type(model).__name__} state"),
    }
    return meta, dict(arrays)


def save(model, path) -> Path:
    """Save a fitted ranker to ``path`` (see the module docstring for the format)."""
    model._check_is_fitted()
    meta, arrays = _model_meta(model, "model")
    return _write(path, meta, arrays)


def corrupt(path, exc: BaseException, what: str = "a rankwise model file") -> InputError:
    """The error for a file that parses but does not hold what a model needs (a missing array,
    a state of the wrong type, an unknown parameter...): never the raw KeyError/TypeError."""
    if isinstance(exc, KeyError):
        detail = f"missing entry {exc}"
    else:
        detail = f"{type(exc).__name__}: {' '.join(str(exc).split())}"  # one line
    return InputError(f"cannot load {path}: corrupt or not {what} ({detail})")


def restore_state(model, state, arrays: dict, path) -> None:
    """``model._set_state(state, arrays)``, any failure reported as a corrupt file."""
    if not isinstance(state, dict):
        raise InputError(f"cannot load {path}: corrupt or not a rankwise model file (state is a "
                         f"{type(state).__name__}, not an object)")
    try:
        model._set_state(state, arrays)
    except InputError:
        raise
    except Exception as exc:  # KeyError, TypeError, ValueError, library parse errors...
        raise corrupt(path, exc) from None


def _build(meta: dict, arrays: dict, path):
    import rankwise.models  # noqa: F401  (fills the registry)

    name = meta.get("class")
    cls = MODEL_REGISTRY.get(name) if isinstance(name, str) else None
    if cls is None:
        raise InputError(f"cannot load {path}: unknown model class {name!r}; known: {sorted(MODEL_REGISTRY)}")
    params = _decode(meta.get("params", {}))
    if not isinstance(params, dict):
        raise InputError(f"cannot load {path}: corrupt or not a rankwise model file (params is a "
                         f"{type(params).__name__}, not an object)")
    try:
        model = cls(**cls._params_from_state(params))
    except InputError:
        raise
    except TypeError as exc:  # an unknown parameter name
        raise InputError(f"cannot load {path}: corrupt or not a rankwise {name} file (its parameters do not "
                         f"match {name}: {exc})") from None
    except Exception as exc:
        raise corrupt(path, exc) from None
    restore_state(model, _decode(meta.get("state", {})), arrays, path)
    return model


def load(path):
    """Load a ranker saved by ``model.save(path)``; never runs code from the file.

    Raises
    ------
    InputError
        If the file is missing, not a rankwise model file, of a newer format version, names
        an unknown model class, or lacks what its class needs (a missing array, an unknown
        parameter, an empty or malformed state).
    """
    meta, arrays = _read(path)
    return _build(meta, arrays, path)


# -- checkpoints (model + training state) -----------------------------------------------------

def save_checkpoint(model, path, train_state: dict, train_arrays: dict[str, np.ndarray]) -> Path:
    """Write a checkpoint: the model state plus the optimiser/loop state needed to resume."""
    meta, arrays = _model_meta(model, "checkpoint")
    meta["train_state"] = _encode(train_state, where="training state")
    for k, v in train_arrays.items():
        arrays[f"train/{k}"] = v
    return _write(path, meta, arrays)


def load_checkpoint(path, model):
    """Read a checkpoint written for a model of ``model``'s class and parameters.

    Returns ``(state, arrays, train_state, train_arrays)``. Parameters that only set the
    training length (``model._resume_free_params``) may differ; any other difference is refused.
    """
    meta, arrays = _read(path)
    if meta.get("kind") != "checkpoint":
        raise InputError(f"resume={str(path)!r} is a saved model, not a training checkpoint")
    if meta.get("class") != type(model).__name__:
        raise InputError(f"resume={str(path)!r} is a checkpoint of {meta.get('class')}, not of {type(model).__name__}")
    saved = _decode(meta.get("params", {}))
    if not isinstance(saved, dict):
        raise InputError(f"cannot load {path}: corrupt checkpoint (params is a {type(saved).__name__})")
    now = _decode(_encode(model._get_params_state(), where="parameters"))
    free = set(getattr(model, "_resume_free_params", ()))
    diff = sorted(k for k in set(saved) | set(now) if k not in free and saved.get(k) != now.get(k))
    if diff:
        shown = ", ".join(f"{k}: checkpoint {saved.get(k)!r} vs now {now.get(k)!r}" for k in diff[:4])
        raise InputError(f"resume={str(path)!r}: the checkpoint was written with other parameters ({shown})")
    train_arrays = {k[len("train/"):]: v for k, v in arrays.items() if k.startswith("train/")}
    model_arrays = {k: v for k, v in arrays.items() if not k.startswith("train/")}
    state, train_state = _decode(meta.get("state", {})), _decode(meta.get("train_state", {}))
    if not isinstance(state, dict) or not isinstance(train_state, dict):
        raise InputError(f"cannot load {path}: corrupt checkpoint (state or train_state is not an object)")
    return state, model_arrays, train_state, train_arrays
