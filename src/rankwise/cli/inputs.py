"""Resolving the CLI's file arguments into data sets and score vectors (TREC runs and qrels are read by
``rankwise.data.Run`` / ``Qrels`` and evaluated by ``rankwise.metrics.evaluate_runs``), and its
``--model``/``--loss``/``--param`` into a model (:func:`build_model`, shared by ``train`` and
``clicks train``)."""
from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import numpy as np

from rankwise.errors import InputError, ParseError

FORMATS = ("auto", "svmlight", "parquet", "movielens", "npz")


def parse_params(items) -> dict:
    """``["alpha=0.1", "hidden=(64,32)", "loss=listnet"]`` → dict; values read as Python literals
    where they parse as one (numbers, tuples, None, True), else kept as strings."""
    out = {}
    for item in items or ():
        if "=" not in item:
            raise InputError(f"--param expects key=value; got {item!r}")
        key, raw = item.split("=", 1)
        key = key.strip()
        if not key.isidentifier():
            raise InputError(f"--param key {key!r} is not a valid parameter name")
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw
        out[key] = value
    return out


def build_model(kind: str, loss: str | None, params: dict, seed):
    """The model a ``rankwise train`` command line describes.

    Defaults are the Python API's (one place: the model's constructor; e.g. GBDTRanker's
    default loss); every model standardises its features itself (trees need not), so every
    ``--model`` gets the same preprocessing.
    """
    from rankwise import models
    from rankwise.models.reduction import make_classifier

    params = dict(params)
    if kind == "reduction":
        clf = params.pop("classifier", "logistic")
        if loss is not None:
            raise InputError("--loss does not apply to --model reduction; choose the classifier with "
                             "--param classifier=NAME and the pair weights with --param weights=kemeny|ndcg")
        try:
            estimator = make_classifier(clf, seed)
        except InputError as exc:
            raise InputError(f"--param {exc}") from None
        cls, args = models.PairwiseReductionRanker, {"estimator": estimator}
    elif kind == "structured":
        cls, args = models.StructuredHingeRanker, {} if loss is None else {"measure": loss}
    else:
        cls = {"linear": models.LinearRanker, "neural": models.NeuralRanker, "gbdt": models.GBDTRanker}[kind]
        args = {} if loss is None else {"loss": loss}
    for old in [k for k in params if k in cls._deprecated_params]:  # former names, for one release
        new = cls._deprecated_params[old]
        new, convert = (new, None) if isinstance(new, str) else new
        print(f"rankwise: --param {old} is deprecated; use --param {new}", file=sys.stderr)
        value = params.pop(old)
        params[new] = value if convert is None else convert(value)
    args.update(params)
    valid = set(cls().get_params())
    if "random_state" in valid:
        args.setdefault("random_state", seed)
    unknown = sorted(set(args) - valid)
    if unknown:
        raise InputError(f"--param {unknown[0]} is not a parameter of {cls.__name__}; valid: {', '.join(sorted(valid))}")
    model = cls(**args)
    model._validate_params()  # a bad value fails before the data is read
    return model


def load_dataset(path, *, fmt: str = "auto", part: str = "train", split: str = "u1", n_features: int | None = None,
                 query_file=None, allow_truncated: bool = False):
    """Read a data set for the CLI.

    ``fmt="auto"`` chooses by the path: a folder holding ``u.data``, ``ratings.dat`` or
    ``ratings.csv`` is MovieLens 100k, 1M or "latest" (``part`` ``"train"`` or ``"test"`` of
    ``split``: see :func:`movielens_split`), ``.parquet`` is Parquet, a folder or ``.npz`` written
    by ``RankingDataset.save`` is the binary cache, anything else LETOR/SVMlight.
    ``n_features`` (SVMlight: the column count, e.g. a model's) and ``query_file`` (SVMlight:
    group sizes, the CLI's ``--group``) and ``allow_truncated`` (``--allow-truncated``) are passed
    to :func:`rankwise.data.read_svmlight`.
    """
    from rankwise import data

    if fmt not in FORMATS:
        raise InputError(f"--format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file or directory")
    if fmt == "auto":
        if p.is_dir() and any((p / f).exists() for f in MOVIELENS_RATINGS):
            fmt = "movielens"
        elif p.suffix == ".parquet":
            fmt = "parquet"
        elif p.is_dir() or p.suffix == ".npz":
            fmt = "npz"
        else:
            fmt = "svmlight"
    if fmt == "movielens":
        if part not in ("train", "test"):
            raise InputError(f"MovieLens part must be 'train' or 'test'; got {part!r}")
        train, test = movielens_split(p, split)
        return train if part == "train" else test
    if fmt == "parquet":
        return data.read_parquet(p)
    if fmt == "npz":
        return data.RankingDataset.load(p)
    return data.read_svmlight(p, n_features=n_features, query_file=query_file, allow_truncated=allow_truncated)


MOVIELENS_RATINGS = ("u.data", "ratings.dat", "ratings.csv")  # 100k, 1M, "latest"
TIME_SPLITS = ("time", "time-full")


@functools.lru_cache(maxsize=2)  # `train` reads the training part, then --valid the test part
def _time_split(path: str, full: bool, stamp: tuple):  # stamp: content digests of the files read
    from rankwise.data.movielens import load_movielens
    from rankwise.data.recsys import recommendation_data

    ml = load_movielens(path)
    return recommendation_data(ml.ratings, ml.items, test_fraction=0.2, n_negatives=100,
                               test_negatives="all" if full else None, random_state=0)


def movielens_split(path, split: str | None):
    """``(train, test)`` of a MovieLens folder for the CLI.

    ``split`` (``--split``): an official split of 100k (``u1`` .. ``u5``, ``ua``, ``ub``; default
    ``u1`` for 100k) through :func:`rankwise.data.load_movielens_100k`; or ``time`` (default for
    the 1M and "latest" layouts, which have no official split): the per-user time split of
    :func:`rankwise.data.recsys.recommendation_data` (each user's latest 20% of ratings held out,
    100 sampled unrated items per list, seed 0, features as of each user's cutoff); or
    ``time-full``: the same training lists, test lists over the full catalogue (every item the
    user never rated)."""
    from rankwise import data
    from rankwise.data.movielens import SPLITS

    p = Path(path)
    layout = next((f for f in MOVIELENS_RATINGS if (p / f).exists()), None)
    if layout is None:
        raise InputError(f"{p}: no MovieLens ratings file ({', '.join(MOVIELENS_RATINGS)}) in this folder")
    if split is None:
        split = "u1" if layout == "u.data" else "time"
    if split in TIME_SPLITS:
        from rankwise.data._digest import file_digest

        # memoised by content (not size and mtime, which an edit or a swapped file can keep)
        stamp = tuple(file_digest(p / f) for f in (layout, "movies.dat", "users.dat", "movies.csv")
                      if (p / f).is_file())
        return _time_split(str(p.resolve()), split == "time-full", stamp)
    if split in SPLITS and layout != "u.data":
        raise InputError(f"--split {split}: {p} is a MovieLens {'1M' if layout == 'ratings.dat' else 'latest'} "
                         f"folder ({layout}), which has no official split; use --split time or time-full")
    if split not in SPLITS:
        raise InputError(f"--split must be one of {', '.join(SPLITS + TIME_SPLITS)}; got {split!r}")
    return data.load_movielens_100k(p, split=split)


def read_scores(path, n_rows: int) -> np.ndarray:
    """One score per line (what ``rankwise predict --out FILE`` writes without ``--trec``)."""
    p = Path(path)
    values = []
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{p}: cannot read scores ({exc.strerror})") from None
    for k, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        try:
            v = float(line)
        except ValueError:
            raise ParseError(p, k, f"{line[:40]!r} is not a number; expected one score per line") from None
        if not np.isfinite(v):
            raise ParseError(p, k, f"score {line!r} is not finite")
        values.append(v)
    if len(values) != n_rows:
        raise InputError(f"{p}: {len(values)} scores but the data set has {n_rows} rows; one score per row is expected")
    return np.asarray(values, dtype=np.float64)


# -- rows to score (predict, export --check) ------------------------------------------------------
class _cli_hints:
    """Reword the Python-only hints of data errors into the command line's options."""

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if isinstance(exc, InputError) and "query_file=" in str(exc):
            raise InputError(str(exc).replace("pass query_file=", "pass --group FILE").replace(
                "query_file=", "--group FILE")) from None
        return False


def _load_predict_data(args, *, n_features):
    """The rows to score: LETOR/SVMlight with or without relevance labels (unlabelled rows get label 0)."""
    kw = dict(fmt=args.format, part="test", split=args.split, query_file=getattr(args, "group", None),
              allow_truncated=getattr(args, "allow_truncated", False))
    path = str(args.data)
    unlabelled = args.format in ("auto", "svmlight") and _svmlight_is_unlabelled(path)
    if not unlabelled:
        return load_dataset(args.data, n_features=n_features, **kw)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="rankwise-predict-") as tmp:
        labelled = Path(tmp) / (Path(path).name.removesuffix(".gz") + ".txt")
        with _open_text(path) as src, open(labelled, "w", encoding="utf-8") as dst:
            for line in src:  # "qid:1 1:0.5 ..." -> "0 qid:1 1:0.5 ..." (comments and blank lines unchanged)
                body = line.lstrip()
                dst.write(line if not body or body.startswith("#") else "0 " + body)
        if kw["query_file"] is None:
            for ext in (".query", ".group"):
                if Path(path + ext).exists():
                    kw["query_file"] = path + ext
        return load_dataset(labelled, n_features=n_features, **kw)


def _open_text(path):
    import gzip

    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _svmlight_is_unlabelled(path) -> bool:
    """Whether the first data line of an SVMlight/LETOR file has no label (starts with ``qid:`` or ``i:v``)."""
    if not Path(path).is_file() or Path(path).suffix in (".parquet", ".npz"):
        return False
    try:
        with _open_text(path) as fh:
            for line in fh:
                body = line.strip()
                if body and not body.startswith("#"):
                    return ":" in body.split()[0]
    except (OSError, UnicodeDecodeError, EOFError):
        return False
    return False

