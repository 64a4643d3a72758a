"""Fuzz targets and their oracles, shared by ``tests/fuzz`` (hypothesis) and ``benchmarks/fuzz.py``.

Every target takes one generated input, runs the public API on it and returns an
``(outcome, detail)`` pair. Outcomes:

- ``ok``: a valid result (checked against an independent oracle where one exists);
- ``rankwise_error``: a ``RankwiseError`` (the input was refused with a clear message);
- ``other_exception``: any other exception (a bug: a traceback from inside a dependency);
- ``silent_accept``: the input holds one of the classes issue 17 lists as invalid (bare CR,
  BOM, NUL, non-ASCII digits, ``_`` in numbers, integers beyond int64, relevance out of range,
  huge group sizes...) or disagrees with the reference reader, yet it was accepted;
- ``nonfinite``: NaN or inf came out of a metric, a loss, a gradient, a Hessian or a prediction;
- ``death`` / ``hang``: only for model loading, which runs in a child process.
"""
from __future__ import annotations

import atexit
import math
import os
import re
import shutil
import tempfile
import warnings

import numpy as np

from rankwise.errors import RankwiseError

OUTCOMES = ("ok", "rankwise_error", "other_exception", "silent_accept", "nonfinite", "death", "hang")
BAD = ("other_exception", "silent_accept", "nonfinite", "death", "hang")

# in memory where there is a tmpfs: opening a file on an overlay /tmp costs milliseconds
_SCRATCH: list[str] = []  # made on first use (not in the model-loading worker processes)


def scratch(name: str) -> str:
    if not _SCRATCH:
        _SCRATCH.append(tempfile.mkdtemp(prefix="rankwise-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
        atexit.register(shutil.rmtree, _SCRATCH[0], True)
    return os.path.join(_SCRATCH[0], name)


def guarded(fn):
    """Run ``fn()``; a RankwiseError is a refusal, anything else a bug."""
    def run(*args, **kwargs):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return fn(*args, **kwargs)
        except RankwiseError as exc:
            return "rankwise_error", str(exc)[:200]
        except Exception as exc:  # noqa: BLE001 - that is the point: any other exception is a finding
            return "other_exception", f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    run.__name__ = fn.__name__
    return run


# ------------------------------------------------------------------ reference SVMlight reader
_NUM = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_NAN = re.compile(r"[+-]?nan\Z", re.IGNORECASE)
_INT = re.compile(r"[+-]?[0-9]+\Z")
_WS = re.compile(rb"[ \t\x0b\x0c]+")
INT64 = 2**63 - 1
MAX_LABEL = 1023.0


class Reject(Exception):
    pass


def text_classes(data: bytes) -> list[str]:
    """The invalid classes of issue 17 found at the byte level of a text file."""
    found = []
    if data.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        found.append("bom")
    if b"\x00" in data:
        found.append("nul")
    if re.search(rb"\r(?!\n)", data):
        found.append("bare_cr")
    if b"\r\n" in data and re.search(rb"(?<!\r)\n", data):
        found.append("mixed_line_endings")
    return found


def reference_svmlight(data: bytes):
    """A slow, obviously-correct reader of the grammar rankwise accepts (one-based indices, no
    group file): returns (labels, qids, doc_ids or None, {(row, col): value}, n_cols) or raises Reject."""
    if text_classes(data):
        raise Reject("bytes")
    rows = []
    for raw in data.split(b"\n"):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if any(c < 32 and c not in (9, 11, 12, 13) for c in raw):
            raise Reject("control")
        part, hash_, comment = raw.partition(b"#")
        toks = [t for t in _WS.split(part) if t]
        if not toks:
            continue
        try:
            toks = [t.decode("ascii") for t in toks]
        except UnicodeDecodeError:
            raise Reject("non-ascii token") from None
        lab = toks[0]
        if ":" in lab or not _NUM.match(lab):
            raise Reject("label")
        label = float(lab)
        if not math.isfinite(label) or abs(label) > MAX_LABEL:
            raise Reject("label range")
        qid = None
        feats = {}
        prev = 0
        for j, t in enumerate(toks[1:]):
            if t.startswith("qid:"):
                if j != 0 or not _INT.match(t[4:]) or abs(int(t[4:])) > INT64:
                    raise Reject("qid")
                qid = int(t[4:])
                continue
            idx, colon, val = t.partition(":")
            if not colon or not idx.isdigit() or not idx.isascii():
                raise Reject("token")
            i = int(idx)
            if i > INT64 or i == 0 or i <= prev:
                raise Reject("index")
            prev = i
            if val == "NULL" or _NAN.match(val):
                v = np.float32(np.nan)
            elif _NUM.match(val):
                with np.errstate(over="ignore"):
                    v = np.float32(float(val))
                if not np.isfinite(v):
                    raise Reject("value inf")
            else:
                raise Reject("value")
            feats[i - 1] = v
        doc = None
        if hash_:
            k = comment.find(b"docid")
            if k >= 0:
                m = re.match(rb"[ \t\x0b\x0c\r]*=[ \t\x0b\x0c\r]*([^ \t\x0b\x0c\r]*)", comment[k + 5:])
                if m and m.group(1):
                    doc = m.group(1).decode("utf-8", "replace")
        rows.append((label, qid, doc, feats))
    if not rows:
        raise Reject("empty")
    has_q = {r[1] is not None for r in rows}
    has_d = {r[2] is not None for r in rows}
    if has_q != {True} or len(has_d) != 1:
        raise Reject("qid/docid on some lines only")
    n_cols = max((max(r[3]) + 1 for r in rows if r[3]), default=0)
    if n_cols > 10**6:
        raise Reject("too wide for the reference")
    # queries contiguous, in order of first appearance (rankwise regroups stably)
    first = {}
    for k, r in enumerate(rows):
        first.setdefault(r[1], k)
    order = sorted(range(len(rows)), key=lambda k: (first[rows[k][1]], k))
    rows = [rows[k] for k in order]
    return ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows] if True in has_d else None,
            {(k, c): v for k, r in enumerate(rows) for c, v in r[3].items()}, n_cols)


@guarded
def svmlight(data: bytes):
    from rankwise.data import read_svmlight

    path = scratch("f.txt")
    with open(path, "wb") as fh:
        fh.write(data)
    try:
        ref = reference_svmlight(data)
    except Reject as exc:
        ref = exc
    try:
        ds = read_svmlight(path, dense=True)
    except RankwiseError as exc:
        return "rankwise_error", str(exc)[:200]
    if isinstance(ref, Reject):
        return "silent_accept", f"accepted, but the reference refuses it ({ref}): {data[:80]!r}"
    labels, qids, docs, feats, n_cols = ref
    X = np.asarray(ds.X)
    want = np.zeros((len(labels), n_cols), dtype=np.float32)
    for (r, c), v in feats.items():
        want[r, c] = v
    same = (ds.labels.tolist() == labels and ds.qid.tolist() == qids and X.shape == want.shape
            and np.array_equal(X, want, equal_nan=True)
            and (docs is None) == (ds.doc_ids is None) and (docs is None or ds.doc_ids.tolist() == docs))
    if not same:
        return "silent_accept", f"read differently from the reference: {data[:80]!r}"
    if not np.all(np.isfinite(ds.labels)):
        return "nonfinite", "labels"
    return "ok", ""


@guarded
def group_file(data: bytes):
    from rankwise.data import read_group_file

    path = scratch("g.query")
    with open(path, "wb") as fh:
        fh.write(data)
    ref = None
    if not text_classes(data):
        sizes = []
        for line in data.split(b"\n"):
            s = line.strip(b" \t\r")
            if not s:
                continue
            if not re.fullmatch(rb"[0-9]+", s) or int(s) == 0 or int(s) > 2**53:
                sizes = None
                break
            sizes.append(int(s))
        if sizes and sum(sizes) <= 2**53:
            ref = np.concatenate(([0], np.cumsum(sizes))).tolist()
    try:
        offsets = read_group_file(path)
    except RankwiseError as exc:
        return "rankwise_error", str(exc)[:200]
    if ref is None or offsets.tolist() != ref:
        return "silent_accept", f"group file {data[:60]!r} accepted as {offsets[:5].tolist()}"
    return "ok", ""


def _trec_ids_ok(ids) -> bool:
    return all(isinstance(s, str) and s and s.isprintable() and "\ufeff" not in s and not any(c.isspace() for c in s)
               for s in ids)


@guarded
def trec_qrels(data: bytes):
    from rankwise.data import read_trec_qrels

    path = scratch("q.qrels")
    with open(path, "wb") as fh:
        fh.write(data)
    qrels = read_trec_qrels(path)
    if text_classes(data):
        return "silent_accept", f"qrels with {text_classes(data)} accepted"
    docs = [d for q in qrels.values() for d in q]
    grades = [g for q in qrels.values() for g in q.values()]
    if not _trec_ids_ok(list(qrels)) or not _trec_ids_ok(docs):
        return "silent_accept", "control characters, BOM or spaces kept in an id"
    if not all(isinstance(g, (int, np.integer)) and abs(int(g)) <= INT64 for g in grades):
        return "silent_accept", "relevance not an int64"
    return "ok", ""


@guarded
def trec_run(data: bytes):
    from rankwise.data import read_trec_run

    path = scratch("r.run")
    with open(path, "wb") as fh:
        fh.write(data)
    run = read_trec_run(path)
    if text_classes(data):
        return "silent_accept", f"run with {text_classes(data)} accepted"
    if not _trec_ids_ok(list(run)) or not _trec_ids_ok([d for q in run.values() for d in q]):
        return "silent_accept", "control characters, BOM or spaces kept in an id"
    if not all(math.isfinite(s) for q in run.values() for s in q.values()):
        return "nonfinite", "a run score is not finite"
    return "ok", ""


# ------------------------------------------------------------------ MovieLens
GENRES = b"unknown|0\nAction|1\n"
ITEMS = b"1|A (1995)|01-Jan-1995||http://a|0|1\n2|B (1996)|01-Jan-1996||http://b|1|0\n3|C|||http://c|0|0\n"
BASE = b"1\t1\t5\t881250949\n1\t2\t3\t881250950\n2\t1\t4\t881250951\n2\t3\t1\t881250952\n"
TEST = b"1\t3\t4\t881250953\n2\t2\t2\t881250954\n"


@guarded
def movielens(parts: dict):
    """``parts``: bytes of u1.base, u1.test, u.item (others fixed)."""
    from rankwise.data import load_movielens_100k

    folder = scratch("ml")
    os.makedirs(folder, exist_ok=True)
    files = {"u.genre": GENRES, "u.item": ITEMS, "u1.base": BASE, "u1.test": TEST, **parts}
    for name, data in files.items():
        with open(os.path.join(folder, name), "wb") as fh:
            fh.write(data)
    train, test = load_movielens_100k(folder, split="u1")
    items = {int(line.split(b"|")[0]) for line in files["u.item"].split(b"\n") if line.strip()} \
        if all(line.split(b"|")[0].strip().isdigit() for line in files["u.item"].split(b"\n") if line.strip()) else set()
    for ds in (train, test):
        if not np.all(np.isin(ds.labels, [1, 2, 3, 4, 5])):
            return "silent_accept", f"rating outside 1..5 accepted: {sorted(set(ds.labels.tolist()))[:5]}"
        if not np.all(np.isfinite(np.asarray(ds.X))):
            return "nonfinite", "features"
        uid = np.asarray(ds.qid)
        if np.any(uid < 1):
            return "silent_accept", "user id < 1 accepted"
        pairs = list(zip(uid.tolist(), ds.doc_ids.tolist()))
        if len(set(pairs)) != len(pairs):
            return "silent_accept", "duplicate (user, item) rows accepted"
        if items and not {int(d) for d in ds.doc_ids.tolist()} <= items:
            return "silent_accept", "item ids missing from u.item accepted"
    return "ok", ""


# ------------------------------------------------------------------ events
@guarded
def events(frame_spec):
    import pandas as pd

    from rankwise.data import from_events

    users, items, outcomes, feats, rule = frame_spec
    frame = pd.DataFrame({"u": users, "i": items, "o": outcomes, "f": feats})
    ds = from_events(frame, user="u", item="i", outcome="o", features=["f"], rule=rule)
    if not np.all(np.isin(ds.labels, [0.0, 1.0])):
        return "silent_accept", "labels outside {0, 1}"
    if not np.all(np.isfinite(np.asarray(ds.X))):
        return "nonfinite", "features"
    return "ok", ""


# ------------------------------------------------------------------ arrays API
def _finite_tree(x) -> bool:
    arr = np.asarray(x, dtype=np.float64) if not hasattr(x, "to_numpy") else x.to_numpy(dtype=np.float64)
    return bool(np.all(np.isfinite(arr)))


METRICS = ["ndcg@10", "ndcg", "err@5", "map", "P@3", "recall@5", "mrr", "auc", "kendall_tau", "pairwise_accuracy",
           "dcg@5"]
PROFILES = [None, "trec_eval", "lightgbm", "xgboost", "sklearn", "ranx", "letor"]


@guarded
def metrics_evaluate(scores, labels, qid, metrics, profile):
    from rankwise.metrics import evaluate

    res = evaluate(scores, labels, qid, metrics=metrics, profile=profile)
    if not all(math.isfinite(v) for v in res.mean.values()):
        return "nonfinite", f"means {dict(res.mean)} for labels {np.asarray(labels)[:4]!r} scores {np.asarray(scores)[:4]!r}"
    if not _finite_tree(res.per_query.select_dtypes("number")):
        return "nonfinite", "per-query values"
    return "ok", ""


@guarded
def losses_grad_hess(loss, scores, labels, offsets):
    from rankwise.losses import grad_hess

    g, h = grad_hess(loss, scores, labels, offsets)
    if not (_finite_tree(g) and _finite_tree(h)):
        return "nonfinite", f"{loss}: grad/hess for scores {np.asarray(scores)[:4]!r} labels {np.asarray(labels)[:4]!r}"
    return "ok", ""


def make_model(kind: str):
    from rankwise.models import GBDTRanker, LinearRanker, NeuralRanker

    if kind == "linear":
        return LinearRanker("listnet", max_iter=3, random_state=0)
    if kind == "neural":
        return NeuralRanker("listnet", hidden=(4,), epochs=1, random_state=0)
    if kind == "gbdt":
        return GBDTRanker("native:lambdarank", n_estimators=2, min_child_samples=1, random_state=0, n_jobs=1)
    raise ValueError(kind)


@guarded
def model_fit_predict(kind, X, y, qid, X_test):
    m = make_model(kind).fit(X, y, qid=qid)
    s = m.predict(X_test)
    if not _finite_tree(s):
        return "nonfinite", f"{kind}: predictions"
    return "ok", ""


# ------------------------------------------------------------------ model files
def model_files(folder: str) -> dict:
    """Small fitted models of every family, saved: the seeds of the model-loading mutations."""
    from rankwise.models import GBDTRanker, LinearRanker, NeuralRanker

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 4)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float64) + (X[:, 1] > 1)
    qid = np.repeat(np.arange(8), 5)
    # the same rows with missing values (absent more often for the relevant rows: splits that send
    # NaN one way, 'inf' thresholds in LightGBM's text) and a categorical column
    Xm = X.copy()
    Xm[(y > 0) & (rng.random(40) < 0.8), 2] = np.nan
    Xm[:, 3] = np.where(y > 0, 5, rng.integers(0, 9, 40))
    Xm[rng.random(40) < 0.1, 3] = np.nan
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, m, data in (
                ("linear", LinearRanker("listnet", max_iter=5, random_state=0), X),
                ("neural", NeuralRanker("listnet", hidden=(4,), epochs=1, random_state=0), X),
                ("lightgbm", GBDTRanker("native:lambdarank", n_estimators=3, min_child_samples=2, random_state=0), X),
                ("xgboost", GBDTRanker("native:rank:ndcg", backend="xgboost", n_estimators=3, random_state=0), X),
                ("lightgbm-missing", GBDTRanker("lambdarank", n_estimators=3, min_child_samples=2, random_state=0,
                                                backend_params={"categorical_feature": "3", "linear_tree": True,
                                                                "min_data_per_group": 2, "cat_smooth": 1}), Xm),
                ("xgboost-missing", GBDTRanker("lambdarank", backend="xgboost", n_estimators=3, random_state=0,
                                               backend_params={"feature_types": ["q", "q", "q", "c"]}), Xm)):
            out[name] = str(m.fit(data, y, qid=qid).save(os.path.join(folder, f"{name}.npz")))
    return out


GBDT_SEEDS = ("lightgbm", "xgboost", "lightgbm-missing", "xgboost-missing")


PROBE = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)


def load_model_file(path: str, expected=None):
    """Load ``path`` and predict on a probe: the oracle of one model-loading case (in a child).

    ``expected``: the original model's scores on the probe. An altered file whose digests were
    *not* recomputed must never load with other scores (that is an edit the digests missed);
    a forged file (digests recomputed) may hold any well-formed model, so only crashes, hangs,
    other exceptions and non-finite scores count there."""
    import rankwise

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = rankwise.load(path)
            if m.n_features_in_ != PROBE.shape[1]:
                return "ok", "a model of another width"
            s = m.predict(PROBE)
    except RankwiseError as exc:
        return "rankwise_error", str(exc)[:200]
    except Exception as exc:  # noqa: BLE001
        return "other_exception", f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    if not np.all(np.isfinite(s)):
        return "nonfinite", "predictions of a loaded model"
    if expected is not None and not np.array_equal(s, expected):
        return "silent_accept", "an altered file loaded with other predictions"
    return "ok", ""


def mutate_zip_bytes(data: bytes, rng) -> bytes:
    """A careless pipeline's damage: bytes flipped, a tail cut, a block repeated."""
    b = bytearray(data)
    k = rng.random()
    if k < 0.5:
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif k < 0.75:
        b = b[:rng.randrange(len(b))]
    else:
        i = rng.randrange(len(b))
        b[i:i] = b[max(0, i - 64):i]
    return bytes(b)


def mutate_text(text: bytes, rng) -> bytes:
    """Booster-text mutations as in issue 17: truncation, digits changed, one byte replaced,
    a line dropped or duplicated, a number made huge, negative or NaN."""
    b = bytearray(text)
    k = rng.random()
    if k < 0.2:
        return bytes(b[:rng.randrange(len(b))])
    if k < 0.55:
        digits = [i for i, c in enumerate(b) if 48 <= c <= 57]
        for _ in range(rng.randint(1, 3)):
            b[rng.choice(digits)] = 48 + rng.randrange(10)
        return bytes(b)
    if k < 0.7:
        b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    lines = bytes(b).split(b"\n")
    i = rng.randrange(len(lines))
    if k < 0.8:
        del lines[i]
    elif k < 0.9:
        lines.insert(i, lines[i])
    else:
        toks = re.split(rb"([-0-9.eE]+)", lines[i])
        nums = [j for j, t in enumerate(toks) if re.fullmatch(rb"-?[0-9][0-9.eE]*", t)]
        if nums:
            toks[rng.choice(nums)] = rng.choice([b"-1", b"nan", b"1e308", b"99999999999", b"-2147483648", b"0"])
        lines[i] = b"".join(toks)
    return b"\n".join(lines)


def _init_child():
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    warnings.simplefilter("ignore")


class ChildLoader:
    """Loads model files in a worker process (a pool of one, started by ``spawn``), so that a
    crash or a hang in a library's parser is counted, not suffered. A dead or stuck worker is
    replaced."""

    def __init__(self, timeout: float = 20.0):
        self.timeout = timeout
        self._pool = None

    def _start(self):
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        self._pool = ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"), initializer=_init_child)

    def _stop(self) -> int | None:
        code = None
        procs = list(getattr(self._pool, "_processes", {}).values())
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join(5)
            code = p.exitcode
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = None
        return code

    def __call__(self, path: str, expected=None):
        from concurrent.futures import TimeoutError as FutureTimeout
        from concurrent.futures.process import BrokenProcessPool

        if self._pool is None:
            self._start()
        fut = self._pool.submit(load_model_file, path, expected)
        try:
            return fut.result(timeout=self.timeout)
        except BrokenProcessPool:
            code = self._stop()
            return "death", f"the loading process died (exit code {code})"
        except FutureTimeout:
            self._stop()
            return "hang", f"loading took more than {self.timeout:g} s"

    def close(self):
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


# ------------------------------------------------------------------ pandas / Parquet
@guarded
def frames(spec):
    import pandas as pd

    from rankwise.data import from_pandas

    qids, labels, feats = spec
    ds = from_pandas(pd.DataFrame({"qid": qids, "label": labels, "f": feats}))
    if not np.all(np.isfinite(ds.labels)):
        return "nonfinite", "labels"
    if np.any(np.isinf(np.asarray(ds.X, dtype=np.float64))):
        return "nonfinite", "features"
    return "ok", ""


def parquet_seed() -> bytes:
    from rankwise.data import RankingDataset, write_parquet

    ds = RankingDataset.from_arrays(np.arange(12, dtype=np.float32).reshape(6, 2), [0.0, 1, 2, 0, 1, 0],
                                    [1, 1, 1, 2, 2, 2])
    path = scratch("seed.parquet")
    write_parquet(ds, path)
    with open(path, "rb") as fh:
        return fh.read()


@guarded
def parquet(data: bytes):
    from rankwise.data import read_parquet

    path = scratch("p.parquet")
    with open(path, "wb") as fh:
        fh.write(data)
    ds = read_parquet(path)
    if not np.all(np.isfinite(ds.labels)):
        return "nonfinite", "labels"
    if np.any(np.isinf(np.asarray(ds.X, dtype=np.float64))):
        return "nonfinite", "features"
    return "ok", ""
