"""Saving and loading rankers without pickle: one ``.npz`` file holding JSON metadata and arrays.

File format (``format_version`` 2)
----------------------------------
A model file is a NumPy ``.npz`` archive (a zip of uncompressed ``.npy`` arrays) written and
read with ``allow_pickle=False``, so loading a file never runs code. It holds

- ``__meta__``: a ``uint8`` array with UTF-8 JSON::

      {"format": "rankwise-model", "format_version": 2, "rankwise_version": "0.1.0",
       "kind": "model" | "checkpoint", "class": "LinearRanker",
       "params": {...constructor arguments...}, "state": {...fitted scalars...},
       "digests": {"coef_": "<sha256 of coef_.npy>", ...},
       "train_state": {...},  # checkpoints only
       "feature_names": [...]  # the training columns' names (``feature_names_``), when the data named them
      }

- ``__digest__``: a ``uint8`` array with the ASCII text ``sha256:<hex>``, the sha256 of the
  ``__meta__.npy`` entry;
- one entry per array of the model's state (numeric arrays only; object arrays are refused).
  Text blobs such as a LightGBM/XGBoost model string are stored as ``uint8`` arrays.

Integrity and validation on load
--------------------------------
Before any array is parsed, the zip entries are listed (stored ``.npy`` entries only, no
duplicates), the metadata's format and version are read, and every entry's sha256 is compared
with the digest stored in the file: a corrupted or edited file is refused with the name of the
file and of the entry (``cannot load m.npz: integrity check failed for 'booster' ...``). The
digests are not a signature: anyone can recompute them, so what a crafted file can still do is
bounded by the validation that follows (finite numeric arrays, strict JSON without NaN, array
shapes checked by the model, GBDT booster text checked by :mod:`rankwise.models._booster_text`
before LightGBM/XGBoost parse it, and a probe prediction that must be finite). For a file from
an untrusted source, ``load(path, untrusted=True)`` does all of that first in a child process, so
that a crash inside a library's parser is reported as an ``InputError`` instead of taking the
caller down. Format-1 files (rankwise 0.1, no digests) still load, with every check but the digests.

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

import hashlib
import inspect
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np

from rankwise._io import atomic_write
from rankwise.errors import InputError

FORMAT = "rankwise-model"
FORMAT_VERSION = 2
#: format versions this rankwise reads (1: no digests)
_READABLE = (1, 2)
#: a loaded model is asked for scores on a probe input when it has at most this many features
_PROBE_MAX_FEATURES = 1 << 22

#: Model classes that :func:`load` may build, by class name. Filled by ``BaseRanker.__init_subclass__``.
MODEL_REGISTRY: dict[str, type] = {}


def _registered(name: str):
    """The class ``name`` of :data:`MODEL_REGISTRY`; a class defined above the models layer (the click models
    and propensity estimators) is registered when its module is imported, which happens here the first time a
    file names it, by the fixed table ``rankwise.SAVED_ELSEWHERE`` of the package root. None for an unknown name."""
    if name not in MODEL_REGISTRY:
        import importlib

        import rankwise

        module = rankwise.SAVED_ELSEWHERE.get(name)
        if module is not None:
            importlib.import_module(module)
    return MODEL_REGISTRY.get(name)


class ParamsInFile:
    """What :func:`save` asks of a saveable class about its constructor parameters, in the common case: they are
    its ``get_params(deep=False)`` and go back to the constructor as they are (a class whose parameters are not
    JSON-able overrides both)."""

    def _get_params_state(self) -> dict:
        return self.get_params(deep=False)

    @classmethod
    def _params_from_state(cls, params: dict) -> dict:
        return params


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
            text = value["__float__"]
            if text not in ("nan", "inf", "-inf"):  # what _encode writes (repr of a non-finite float)
                raise ValueError(f"'__float__' entry {str(text)[:40]!r}; expected 'nan', 'inf' or '-inf'")
            return float(text)
        return {k: _decode(v) for k, v in value.items()}
    return value


def text_to_array(text: str) -> np.ndarray:
    """Store a text blob (e.g. a GBDT model string) as a ``uint8`` array."""
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).copy()


def array_to_text(arr: np.ndarray) -> str:
    return np.asarray(arr, dtype=np.uint8).tobytes().decode("utf-8")


# -- writing / reading ------------------------------------------------------------------------

def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=False)
    return buf.getvalue()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write(path, meta: dict, arrays: dict[str, np.ndarray]) -> Path:
    path = Path(os.fspath(path))
    entries = {}
    for name, arr in arrays.items():
        if name in ("__meta__", "__digest__"):
            raise InputError(f"array name {name!r} is reserved")
        a = np.asarray(arr)
        if a.dtype.kind not in "biuf":
            raise InputError(f"cannot save array {name!r}: dtype {a.dtype} is not numeric")
        entries[name] = _npy_bytes(a)
    meta = dict(meta, digests={name: _sha256(b) for name, b in entries.items()})
    blob = json.dumps(meta, allow_nan=False, sort_keys=True).encode("utf-8")
    entries["__meta__"] = _npy_bytes(np.frombuffer(blob, dtype=np.uint8))
    entries["__digest__"] = _npy_bytes(np.frombuffer(b"sha256:" + _sha256(entries["__meta__"]).encode(),
                                                     dtype=np.uint8))
    # atomic: a crash while writing a model or checkpoint keeps the previous one (rankwise._io)
    with atomic_write(path) as fh:  # a plain .npz (stored entries, fixed dates: same model, same bytes)
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as zf:
            for name, data in entries.items():
                zf.writestr(zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0)), data)
    return path


def _no_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def _entries(path, data: bytes) -> dict[str, bytes]:
    """The raw ``.npy`` entries of a model file, after the zip-level checks."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
            names = [i.filename for i in infos]
            if len(set(names)) != len(names):
                raise InputError(f"cannot load {path}: corrupt model file (an entry appears twice in the archive)")
            for info in infos:
                if not info.filename.endswith(".npy") or info.compress_type != zipfile.ZIP_STORED:
                    raise InputError(f"cannot load {path}: not a rankwise model file (entry {info.filename[:60]!r} "
                                     "is not a stored .npy array)")
                if info.file_size > len(data):
                    raise InputError(f"cannot load {path}: corrupt model file (entry {info.filename[:60]!r} claims "
                                     f"{info.file_size} bytes in a file of {len(data)})")
            return {i.filename[:-4]: zf.read(i) for i in infos}  # zf.read checks each entry's CRC-32
    except InputError:
        raise
    except Exception as exc:  # zip errors: say what the file should be
        raise InputError(f"cannot load {path}: not a rankwise model file ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:200]})") from None


def _array(path, name: str, raw: bytes) -> np.ndarray:
    try:
        arr = np.lib.format.read_array(io.BytesIO(raw), allow_pickle=False)
    except Exception as exc:  # a malformed .npy header, an object array, a short entry
        raise InputError(f"cannot load {path}: not a rankwise model file (entry {name!r}: {type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:200]})") from None
    if arr.dtype.kind not in "biuf":
        raise InputError(f"cannot load {path}: entry {name!r} has dtype {arr.dtype}; model arrays are numeric")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise InputError(f"cannot load {path}: entry {name!r} holds NaN or infinite values; a fitted model's "
                         "arrays are finite (the file is corrupt or was edited)")
    return arr


def _read_bytes(path, data: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    entries = _entries(path, data)
    if "__meta__" not in entries:
        raise InputError(f"cannot load {path}: not a rankwise model file (no '__meta__' entry)")
    meta_raw = entries.pop("__meta__")
    digest_raw = entries.pop("__digest__", None)
    meta_arr = _array(path, "__meta__", meta_raw)
    try:
        meta = json.loads(meta_arr.tobytes().decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InputError(f"cannot load {path}: corrupt metadata ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:200]})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise InputError(f"cannot load {path}: not a rankwise model file (format {meta.get('format')!r})"
                         if isinstance(meta, dict) else f"cannot load {path}: corrupt metadata")
    version = meta.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise InputError(f"cannot load {path}: format_version missing or not an integer")
    if version > FORMAT_VERSION:
        raise InputError(f"cannot load {path}: it was written with model format version {version} "
                         f"(rankwise {meta.get('rankwise_version', '?')}), but this rankwise reads "
                         f"versions up to {FORMAT_VERSION}; upgrade rankwise to load it")
    if version not in _READABLE:
        raise InputError(f"cannot load {path}: unknown model format version {version}")
    if version >= 2:  # integrity: the metadata, then every array, before any array is parsed
        if digest_raw is None:
            raise InputError(f"cannot load {path}: integrity check failed (no '__digest__' entry in a format "
                             f"{version} file)")
        want = _array(path, "__digest__", digest_raw).tobytes()
        if want != b"sha256:" + _sha256(meta_raw).encode():
            raise InputError(f"cannot load {path}: integrity check failed for '__meta__' (its sha256 differs from "
                             "the one stored in the file): the file is corrupt or was edited")
        digests = meta.get("digests")
        if not isinstance(digests, dict) or set(digests) != set(entries):
            missing = sorted(set(entries) ^ set(digests if isinstance(digests, dict) else ()))
            raise InputError(f"cannot load {path}: integrity check failed: the arrays in the file and the digests "
                             f"in its metadata differ (e.g. {missing[:1]})")
        for name, raw in entries.items():
            if digests[name] != _sha256(raw):
                raise InputError(f"cannot load {path}: integrity check failed for {name!r} (its sha256 differs from "
                                 "the one stored in the file): the file is corrupt or was edited")
    elif digest_raw is not None:
        raise InputError(f"cannot load {path}: corrupt model file ('__digest__' entry in a format 1 file)")
    arrays = {name: _array(path, name, raw) for name, raw in entries.items()}
    return meta, arrays


def forge(path, entries: dict[str, bytes], meta: dict | None = None) -> Path:
    """Write a model file from raw ``.npy`` entries (``{name: bytes}``) and metadata, with fresh digests.

    The digests stop accidental corruption, not a forger: this is what a forger (or a test of
    the validation behind the digests) does. ``meta`` defaults to the JSON in ``entries["__meta__"]``.
    """
    entries = {k: v for k, v in entries.items() if k not in ("__meta__", "__digest__")} | \
        {"__meta__": entries.get("__meta__", b"")}
    if meta is None:
        meta = json.loads(np.lib.format.read_array(io.BytesIO(entries["__meta__"])).tobytes())
    meta = dict(meta, digests={k: _sha256(v) for k, v in entries.items() if k != "__meta__"})
    entries["__meta__"] = _npy_bytes(np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8))
    entries["__digest__"] = _npy_bytes(np.frombuffer(b"sha256:" + _sha256(entries["__meta__"]).encode(),
                                                     dtype=np.uint8))
    path = Path(path)
    with atomic_write(path) as fh, zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in entries.items():
            zf.writestr(name + ".npy", data)
    return path


def raw_entries(path) -> dict[str, bytes]:
    """The raw ``.npy`` entries of a model file, unchecked (for :func:`forge`)."""
    with zipfile.ZipFile(path) as zf:
        return {i.filename[:-4]: zf.read(i) for i in zf.infolist()}


def _file_bytes(path) -> bytes:
    path = Path(os.fspath(path))
    if not path.is_file():
        raise InputError(f"cannot load {path}: no such file")
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise InputError(f"cannot load {path}: {exc.strerror or exc}") from None


def _read(path) -> tuple[dict, dict[str, np.ndarray]]:
    return _read_bytes(Path(os.fspath(path)), _file_bytes(path))


def _model_meta(model, kind: str) -> tuple[dict, dict]:
    from rankwise import __version__

    state, arrays = model._get_state()
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "rankwise_version": __version__,
        "kind": kind,
        "class": type(model).__name__,
        "module": type(model).__module__,
        "params": _encode(model._get_params_state(), where=f"{type(model).__name__} parameters"),
        "state": _encode(state, where=f"{type(model).__name__} state"),
    }
    names = getattr(model, "feature_names_", None)
    if names is not None:
        meta["feature_names"] = [str(n) for n in names]
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
    # The registry is full: importing this module ran rankwise/models/__init__.py first, which
    # imports every model module (importing the package here would close an import cycle).
    name = meta.get("class")
    cls = _registered(name) if isinstance(name, str) else None
    if cls is None:
        import rankwise

        known = sorted(set(MODEL_REGISTRY) | set(rankwise.SAVED_ELSEWHERE))
        raise InputError(f"cannot load {path}: unknown model class {name!r}; known: {known}")
    try:
        params = _decode(meta.get("params", {}))
        state = _decode(meta.get("state", {}))
    except (ValueError, RecursionError) as exc:
        raise corrupt(path, exc) from None
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
    n_features = state.get("n_features_in_") if isinstance(state, dict) else None
    if n_features is not None and (isinstance(n_features, bool) or not isinstance(n_features, int)
                                   or not 0 <= n_features <= 2**31 - 2):
        raise InputError(f"cannot load {path}: corrupt or not a rankwise model file (n_features_in_ is "
                         f"{str(n_features)[:40]!r}, not a feature count)")
    restore_state(model, state, arrays, path)
    names = meta.get("feature_names")
    if names is not None:
        if not (isinstance(names, list) and all(isinstance(n, str) for n in names)
                and len(names) == getattr(model, "n_features_in_", len(names))):
            raise InputError(f"cannot load {path}: corrupt or not a rankwise model file (feature_names is not a list "
                             f"of {getattr(model, 'n_features_in_', '?')} strings)")
        model.feature_names_ = names
    _probe(model, path)
    return model


def _probe(model, path) -> None:
    """Scores of the loaded model on two all-zero rows (one query) must come out, finite.

    Catches what the per-array checks cannot see: an array of the wrong shape for the model, a
    non-finite value produced from finite parts, a state the model cannot predict with."""
    d = getattr(model, "n_features_in_", None)
    if not isinstance(d, (int, np.integer)) or not 0 < d <= _PROBE_MAX_FEATURES:
        return
    X = np.zeros((2, int(d)), dtype=np.float32)
    try:
        kw = {"qid": np.zeros(2, dtype=np.int64)} if "qid" in inspect.signature(model.predict).parameters else {}
        with np.errstate(all="ignore"):
            scores = np.asarray(model.predict(X, **kw), dtype=np.float64)
    except Exception as exc:
        raise corrupt(path, exc, f"a rankwise {type(model).__name__} file (predicting on a probe input failed)") \
            from None
    if scores.shape != (2,) or not np.all(np.isfinite(scores)):
        raise InputError(f"cannot load {path}: corrupt or not a rankwise {type(model).__name__} file (its "
                         f"scores on a probe input are {scores.ravel()[:2].tolist()}, not two finite numbers)")


def _load_bytes(path, data: bytes):
    meta, arrays = _read_bytes(path, data)
    try:
        return _build(meta, arrays, path)
    except RecursionError as exc:
        raise corrupt(path, exc) from None


#: seconds a child process may take to check a file given to ``load(path, untrusted=True)``
UNTRUSTED_TIMEOUT = 120.0


def _check_in_child(path, data: bytes, timeout: float) -> None:
    """Run the whole load (checks, the library's parser, the probe) in a child process."""
    import signal

    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2])  # the directory holding the rankwise package
    env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("OMP_NUM_THREADS", "1")
    code = "import sys; from rankwise.models.persistence import _child_main; sys.exit(_child_main())"
    try:
        proc = subprocess.run([sys.executable, "-c", code, str(path)], input=data, capture_output=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise InputError(f"cannot load {path}: checking the file in a child process did not finish in {timeout:g} s "
                         "(a hostile or corrupt model file can make a library loop forever); it was not loaded") \
            from None
    out = proc.stdout.decode("utf-8", "replace").strip().splitlines()
    if proc.returncode < 0:
        try:
            sig = signal.Signals(-proc.returncode).name
        except ValueError:
            sig = f"signal {-proc.returncode}"
        raise InputError(f"cannot load {path}: the file crashed the model library in a child process ({sig}); it is "
                         "corrupt or hostile and was not loaded")
    if proc.returncode == 0 and out and out[-1] == "ok":
        return
    if proc.returncode == 3 and out:
        raise InputError(json.loads(out[-1])["error"])
    err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
    raise InputError(f"cannot load {path}: the child process checking the file failed (exit code {proc.returncode}"
                     f"{': ' + err[-1][:200] if err else ''}); it was not loaded")


def _child_main() -> int:
    """Entry point of the child process of ``load(..., untrusted=True)``: file bytes on stdin."""
    path = sys.argv[1]
    data = sys.stdin.buffer.read()
    try:
        _load_bytes(path, data)
    except InputError as exc:
        print(json.dumps({"error": str(exc)}))
        return 3
    print("ok")
    return 0


def load(path, *, untrusted: bool = False, timeout: float | None = None):
    """Load a ranker saved by ``model.save(path)``; never runs code from the file.

    Every array's sha256 is checked against the digest stored in the file, arrays must be
    finite, GBDT booster text is validated before LightGBM/XGBoost parse it, and the loaded
    model must give finite scores on a probe input.

    Parameters
    ----------
    path : str or Path
    untrusted : bool
        Load a file from a source you do not control: the whole load (including the GBDT
        library's own parser and a probe prediction) first runs in a child process, so that a
        crash or a hang there is reported as an ``InputError`` and the caller survives; then the
        same bytes are loaded here. Costs a fresh interpreter importing rankwise's models (seconds).
    timeout : float, optional
        Seconds the child may take (default :data:`UNTRUSTED_TIMEOUT`); only with ``untrusted``.

    Raises
    ------
    InputError
        If the file is missing, not a rankwise model file, corrupt (digest mismatch), of a
        newer format version, names an unknown model class, lacks what its class needs (a
        missing array, an unknown parameter, an empty or malformed state), holds non-finite
        numbers or malformed booster text, or (with ``untrusted``) crashes or hangs the child.
    """
    data = _file_bytes(path)
    if untrusted:
        _check_in_child(path, data, UNTRUSTED_TIMEOUT if timeout is None else float(timeout))
    return _load_bytes(path, data)


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
    try:
        saved = _decode(meta.get("params", {}))
        state, train_state = _decode(meta.get("state", {})), _decode(meta.get("train_state", {}))
    except (ValueError, RecursionError) as exc:
        raise corrupt(path, exc, "a rankwise checkpoint") from None
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
    if not isinstance(state, dict) or not isinstance(train_state, dict):
        raise InputError(f"cannot load {path}: corrupt checkpoint (state or train_state is not an object)")
    return state, model_arrays, train_state, train_arrays
