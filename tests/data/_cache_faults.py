"""Stale, swapped and corrupted parsed-data caches (issue 29 item 4), shared by
``tests/data/test_cache_faults.py`` and ``benchmarks/faults_cache.py``.

Each kind fills the cache of ``read_svmlight`` from a small realistic file, damages it (or the
source behind it) one way, then reads again. A kind *served* when the read returns data that
differ from a fresh parse; it *died* when the process was killed (a segfault); it was *rebuilt*
when a third read returns the fresh data from the cache (the parser switched off) without a
warning. The kinds run in a child process (``python _cache_faults.py KIND ...``), restarted after a
death, so a crash is counted, not suffered.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent / "src"


# ------------------------------------------------------------------------------ source files
def _dense_text(seed: int, crlf: bool = False) -> str:
    """A LETOR 4.0-like file: 3 queries of 7..12 docs, 6 features with full-precision and
    scientific-notation values, NULL features, ``#docid`` comments."""
    rng = np.random.default_rng(seed)
    lines = []
    for q in range(3):
        for d in range(7 + 2 * q + seed % 2):
            label = int(rng.integers(0, 3))
            feats = []
            for j in range(1, 7):
                r = rng.random()
                if r < 0.08:
                    feats.append(f"{j}:NULL")
                elif r < 0.2:
                    feats.append(f"{j}:{rng.random() * 1e-5:.6e}")
                else:
                    feats.append(f"{j}:{rng.random():.17g}")
            lines.append(f"{label} qid:{1000 * seed + 7 * q} {' '.join(feats)} #docid = GX{q:03d}-{d:02d}-{seed} "
                         f"inc = {rng.random():.6f} prob = {rng.random():.6f}")
    return ("\r\n" if crlf else "\n").join(lines) + ("\r\n" if crlf else "\n")


def _sparse_text(seed: int) -> tuple[str, str]:
    """A LightGBM-style file without qid (group sizes in ``.query``), 400 sparse columns."""
    rng = np.random.default_rng(seed)
    sizes = [5, 3, 6]
    lines = []
    for _ in range(sum(sizes)):
        cols = np.sort(rng.choice(np.arange(1, 401), size=int(rng.integers(3, 9)), replace=False))
        lines.append(f"{int(rng.integers(0, 5))} " + " ".join(f"{c}:{rng.standard_normal():.9g}" for c in cols))
    lines[0] += " 400:1"  # every fixture has 400 columns
    return "\n".join(lines) + "\n", "".join(f"{s}\n" for s in sizes)


class Case:
    """The files of one kind: ``data`` (+ ``group``), the cache ``root`` and its one ``entry``."""

    def __init__(self, tmp: Path, sparse: bool):
        self.tmp = tmp
        self.sparse = sparse
        self.root = tmp / "cache"
        if sparse:
            self.data = tmp / "rank.train"
            text, group = _sparse_text(1)
            self.data.write_text(text)
            self.group = tmp / "rank.train.query"
            self.group.write_text(group)
        else:
            self.data = tmp / "train.txt"
            self.data.write_bytes(_dense_text(1, crlf=True).encode())
            self.group = None

    def read(self, **kw):
        from rankwise.data import read_svmlight

        return read_svmlight(self.data, cache=self.root, **kw)

    @property
    def entry(self) -> Path:
        dirs = [p for p in self.root.iterdir() if not p.name.startswith(".")]
        assert len(dirs) == 1, dirs
        return dirs[0]


# ------------------------------------------------------------------------------ damages
def _keep_stat(path: Path, write):
    st = path.stat()
    write()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size


def _flip_byte(path: Path, where: float = 0.7, mask: int = 0x10):
    b = bytearray(path.read_bytes())
    header = 128  # .npy header of these small arrays
    k = header + int((len(b) - header) * where)
    b[k] ^= mask
    path.write_bytes(bytes(b))


def _rewrite(path: Path, change):
    arr = np.load(path, allow_pickle=False)
    np.save(path, change(arr.copy()))


def _meta(entry: Path, change):
    meta = json.loads((entry / "meta.json").read_text())
    change(meta)
    (entry / "meta.json").write_text(json.dumps(meta))


def _forge_digests(entry: Path):
    """Recompute the recorded array digests (a damage that also rewrote the metadata), so that
    only the structural checks stand between the arrays and the kernels."""
    try:
        from rankwise.data._cache import array_digest
    except ImportError:  # a version without digests: nothing to forge
        return
    meta = json.loads((entry / "meta.json").read_text())
    for name in list(meta.get("digests", {})):
        if name.endswith(".npy"):
            meta["digests"][name] = array_digest(np.load(entry / name), meta["digests"]["algorithm"])
    (entry / "meta.json").write_text(json.dumps(meta))


def _labels_edited(c: Case):
    def write():
        t = c.data.read_bytes()
        k = t.index(b" qid:", t.index(b"\n") + 1)  # second line's label: one digit
        old = t[k - 1:k]
        new = b"2" if old != b"2" else b"0"
        c.data.write_bytes(t[:k - 1] + new + t[k:])
    _keep_stat(c.data, write)


def _file_replaced(c: Case):
    def write():
        t = c.data.read_bytes().split(b"\r\n")
        # another file of the same size: the first query's documents in reverse order
        n = sum(1 for line in t if b"qid:1000 " in line)
        c.data.write_bytes(b"\r\n".join(t[:n][::-1] + t[n:]))
    _keep_stat(c.data, write)


def _group_swapped(c: Case):
    _keep_stat(c.group, lambda: c.group.write_text("6\n3\n5\n"))


def _foreign_cache(c: Case):
    other = c.tmp / "other"
    other.mkdir()
    (other / "train.txt").write_text(_dense_text(2))
    from rankwise.data import read_svmlight

    read_svmlight(other / "train.txt", cache=other / "cache")
    src = next(p for p in (other / "cache").iterdir() if not p.name.startswith("."))
    dst = c.entry
    shutil.rmtree(dst)
    shutil.copytree(src, dst)


def _other_options(c: Case):
    """The entry of the same file read with other options (``n_features=8``) in its place."""
    other = c.tmp / "cache2"
    from rankwise.data import read_svmlight

    read_svmlight(c.data, cache=other, n_features=8)
    src = next(p for p in other.iterdir() if not p.name.startswith("."))
    dst = c.entry
    shutil.rmtree(dst)
    shutil.copytree(src, dst)


def _header_dtype(c: Case):
    p = c.entry / "X.npy"
    b = p.read_bytes()
    assert b"'<f4'" in b[:128]
    p.write_bytes(b.replace(b"'<f4'", b"'<i4'", 1))


def _truncate(name):
    def f(c: Case):
        p = c.entry / name
        b = p.read_bytes()
        p.write_bytes(b[: len(b) // 2])
    return f


def _unlink(name):
    return lambda c: (c.entry / name).unlink()


def _sparse_indices(change, forge=False):
    def f(c: Case):
        _rewrite(c.entry / "X_indices.npy", change)
        if forge:
            _forge_digests(c.entry)
    return f


def _swap_in_row(ind):
    ind[[1, 2]] = ind[[2, 1]]  # row 0 holds at least 3 entries
    return ind


def _bitflip_index(ind):
    ind[4] ^= np.asarray(1, dtype=ind.dtype)  # the lowest bit: the index stays in range
    return ind


def _set(k, value):
    def f(ind):
        ind[k] = value
        return ind
    return f


def _no_digests_labels(c: Case):
    """The recorded digests removed and a label changed (a pre-digest entry edited)."""
    _meta(c.entry, lambda m: m.pop("digests", None))
    _rewrite(c.entry / "labels.npy", lambda a: np.where(a == a[0], a, a[0]))


def _fewer_columns(c: Case):
    _rewrite(c.entry / "X.npy", lambda a: np.ascontiguousarray(a[:, :-1]))
    _meta(c.entry, lambda m: m.update(shape=[m["shape"][0], m["shape"][1] - 1],
                                      feature_names=None))


def _offsets_shifted(c: Case):
    _rewrite(c.entry / "query_offsets.npy", lambda a: np.concatenate(([a[0], a[1] + 1], a[2:])))


def _entry_is_file(c: Case):
    e = c.entry
    shutil.rmtree(e)
    e.write_bytes(b"not a folder")


def _empty_entry(c: Case):
    e = c.entry
    shutil.rmtree(e)
    e.mkdir()


#: kind -> (sparse fixture?, damage)
KINDS = {
    # the source behind the entry changed, size and mtime kept
    "labels edited, size and mtime kept": (False, _labels_edited),
    "file replaced, same size and mtime": (False, _file_replaced),
    ".query group sizes swapped, same size and mtime": (True, _group_swapped),
    # the entry swapped
    "another data set's cache in its place": (False, _foreign_cache),
    "same file, other options' cache in its place": (False, _other_options),
    # dense arrays damaged
    "byte flipped in X.npy": (False, lambda c: _flip_byte(c.entry / "X.npy")),
    "byte flipped in labels.npy": (False, lambda c: _flip_byte(c.entry / "labels.npy", mask=0x40)),
    "NaN block in X": (False, lambda c: _rewrite(c.entry / "X.npy", lambda a: (a.__setitem__(
        (slice(2, 6), slice(1, 4)), np.nan), a)[1])),
    "fewer columns (X and meta.json)": (False, _fewer_columns),
    "doc ids reversed": (False, lambda c: _rewrite(c.entry / "doc_ids.npy", lambda a: a[::-1])),
    "query ids swapped": (False, lambda c: _rewrite(c.entry / "query_ids.npy", lambda a: a[[1, 0, 2]])),
    "query boundary moved": (False, _offsets_shifted),
    "X.npy header dtype edited (f4 -> i4)": (False, _header_dtype),
    "labels.npy truncated": (False, _truncate("labels.npy")),
    "X.npy missing": (False, _unlink("X.npy")),
    "meta.json missing": (False, _unlink("meta.json")),
    "meta.json truncated": (False, _truncate("meta.json")),
    "digests removed, a label edited": (False, _no_digests_labels),
    "entry folder empty": (False, _empty_entry),
    "entry replaced by a file": (False, _entry_is_file),
    # sparse (CSR) arrays damaged
    "non-monotone sparse index (two swapped)": (True, _sparse_indices(_swap_in_row)),
    "bit-flipped sparse index": (True, _sparse_indices(_bitflip_index)),
    "sparse index out of range": (True, _sparse_indices(_set(3, 1 << 30))),
    "negative sparse index": (True, _sparse_indices(_set(3, -(1 << 30)))),
    "sparse index out of range, digests recomputed": (True, _sparse_indices(_set(3, 1 << 30), forge=True)),
    "negative sparse index, digests recomputed": (True, _sparse_indices(_set(3, -(1 << 30)), forge=True)),
    "non-monotone sparse index, digests recomputed": (True, _sparse_indices(_swap_in_row, forge=True)),
    "sparse indptr decreasing": (True, lambda c: _rewrite(c.entry / "X_indptr.npy", lambda a: (
        a.__setitem__(2, a[1] - 1), a)[1])),
    "byte flipped in X_data.npy": (True, lambda c: _flip_byte(c.entry / "X_data.npy", mask=0x01)),
}


# ------------------------------------------------------------------------------ one kind
def _same(a, b) -> bool:
    import scipy.sparse as sp

    if sp.issparse(a.X) != sp.issparse(b.X) or a.X.shape != b.X.shape:
        return False
    xa = a.X.toarray() if sp.issparse(a.X) else np.asarray(a.X)
    xb = b.X.toarray() if sp.issparse(b.X) else np.asarray(b.X)
    if xa.dtype != xb.dtype or not np.array_equal(xa, xb, equal_nan=True):
        return False
    if not (np.array_equal(a.labels, b.labels) and np.array_equal(a.query_offsets, b.query_offsets)
            and np.array_equal(a.query_ids, b.query_ids)):
        return False
    if (a.doc_ids is None) != (b.doc_ids is None):
        return False
    return a.doc_ids is None or np.array_equal(a.doc_ids, b.doc_ids)


def _use(ds) -> None:
    """What a caller does next with the data: densify, multiply, evaluate (kernels that index)."""
    import scipy.sparse as sp

    from rankwise.metrics import evaluate

    X = ds.X
    dense = X.toarray() if sp.issparse(X) else X
    scores = np.nan_to_num(X @ np.ones(X.shape[1], dtype=np.float32)) + 1e-3 * np.nan_to_num(dense).sum(axis=1)
    evaluate(scores, ds.labels, ds.qid, metrics=["ndcg@10"])


def run_kind(kind: str, tmp: Path) -> dict:
    """Run one kind in this process; returns served / warnings / rebuilt / error."""
    import rankwise.data.svmlight as S
    from rankwise.data import read_svmlight

    sparse, damage = KINDS[kind]
    c = Case(tmp, sparse)
    kw = {"dense": False} if sparse else {}
    c.read(**kw)  # fills the cache
    damage(c)
    out = {"kind": kind, "served": None, "warnings": 0, "rebuilt": None, "error": None}
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            got = c.read(**kw)
            _use(got)
        except Exception as exc:  # noqa: BLE001 -- any error is a finding, reported by type
            out["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
            got = None
    out["warnings"] = sum("cache" in str(x.message) for x in w)
    out["warning_text"] = next((str(x.message) for x in w if "cache" in str(x.message)), "")
    fresh = read_svmlight(c.data, **kw)
    out["served"] = got is not None and not _same(got, fresh)
    # rebuilt: the next read comes from the cache (the parser switched off) and equals a fresh parse
    orig = S._parse_bytes

    def no_parse(*a, **k):
        raise RuntimeError("parsed (no valid cache entry)")

    S._parse_bytes = no_parse
    try:
        with warnings.catch_warnings(record=True) as w2:
            warnings.simplefilter("always")
            again = c.read(**kw)
        out["rebuilt"] = _same(again, fresh) and not any("cache" in str(x.message) for x in w2)
    except Exception:  # noqa: BLE001
        out["rebuilt"] = False
    finally:
        S._parse_bytes = orig
    return out


def run_kinds(kinds, *, timeout: float = 600.0, src: Path = SRC) -> list[dict]:
    """Run ``kinds`` in child processes (one child for many kinds, a new one after a death)."""
    kinds = list(kinds)
    results = {}
    env = dict(os.environ, PYTHONPATH=str(src), OMP_NUM_THREADS="1")
    while len(results) < len(kinds):
        todo = [k for k in kinds if k not in results]
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), *todo], capture_output=True,
                              text=True, env=env, timeout=timeout)
        started = None
        for line in proc.stdout.splitlines():
            if line.startswith("START "):
                started = json.loads(line[6:])
            elif line.startswith("RESULT "):
                r = json.loads(line[7:])
                r["died"] = False
                results[r["kind"]] = r
                started = None
        if proc.returncode != 0:
            victim = started or todo[0]
            if victim in results:  # a failure after the last kind: nothing more to learn
                break
            results[victim] = {"kind": victim, "served": None, "warnings": 0, "rebuilt": False,
                               "died": proc.returncode < 0, "error": f"exit {proc.returncode}: "
                               f"{proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ''}"[:300]}
    return [results[k] for k in kinds]


def _main(argv) -> int:
    for kind in argv:
        print("START " + json.dumps(kind), flush=True)
        with tempfile.TemporaryDirectory() as d:
            r = run_kind(kind, Path(d))
        print("RESULT " + json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
