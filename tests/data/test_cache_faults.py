"""The parsed-data cache of ``read_svmlight`` cannot serve stale, foreign or corrupted data
(issue 29 item 4): each damage kind of ``_cache_faults.KINDS`` (29, run in child processes so a
segfault is counted) is refused with one warning and rebuilt; concurrent readers and writers
never see a half-written entry; a read-only or full cache folder means no cache, with one
warning, never an error."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _cache_faults as F  # noqa: E402

from rankwise.data import RankingDataset, read_svmlight  # noqa: E402
from rankwise.data import _cache  # noqa: E402


@pytest.fixture(scope="module")
def fault_results():
    return {r["kind"]: r for r in F.run_kinds(F.KINDS)}


@pytest.fixture(autouse=True)
def _fresh_warned_roots(monkeypatch):
    monkeypatch.setattr(_cache, "_WARNED_ROOTS", set())


@pytest.mark.parametrize("kind", list(F.KINDS))
def test_a_damaged_cache_is_never_served(fault_results, kind):
    r = fault_results[kind]
    assert not r["died"], r
    assert r["error"] is None, r
    assert r["served"] is False, r          # the data returned equal a fresh parse
    assert r["warnings"] == 1, r             # one warning naming the entry and what is wrong
    assert "parsed-data cache entry" in r["warning_text"] and "rebuilt" in r["warning_text"], r
    assert r["rebuilt"] is True, r           # the next read is served from a sound entry


def test_at_least_23_kinds_and_the_issue_s_named_ones():
    assert len(F.KINDS) >= 23
    for named in ("labels edited", "file replaced", "group sizes swapped", "another data set", "byte flipped in X",
                  "byte flipped in labels", "NaN block", "fewer columns", "doc ids reversed", "non-monotone sparse",
                  "bit-flipped sparse", "out of range", "negative sparse"):
        assert any(named in k for k in F.KINDS), named


def _fixture(tmp_path):
    c = F.Case(tmp_path, sparse=False)
    return c, read_svmlight(c.data)


def test_an_ordinary_edit_is_parsed_again_without_a_warning(tmp_path):
    c, _ = _fixture(tmp_path)
    c.read()
    c.data.write_text(F._dense_text(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = c.read()
    assert F._same(got, read_svmlight(c.data))
    assert len([p for p in c.root.iterdir()]) == 1  # the slot was replaced, not a second entry added


def _assert_one_warning_and_no_entry(c, fresh, record, match):
    msgs = [str(w.message) for w in record if "cache" in str(w.message)]
    assert len(msgs) == 1 and match in msgs[0] and str(c.root) in msgs[0], msgs


@pytest.mark.parametrize("err", [errno.EROFS, errno.EACCES, errno.ENOSPC])
def test_an_unwritable_cache_folder_means_no_cache_and_one_warning(tmp_path, monkeypatch, err):
    """Read-only, denied or full (ENOSPC in the middle of writing the entry): the data come back,
    one warning for the folder (not one per read), nothing partial left behind."""
    c, fresh = _fixture(tmp_path)
    real_save = np.save
    calls = []

    def failing_save(path, arr, *a, **k):
        calls.append(path)
        if len(calls) >= 2:  # the first array written, then the disk is full / read-only
            raise OSError(err, os.strerror(err), str(path))
        return real_save(path, arr, *a, **k)

    monkeypatch.setattr(np, "save", failing_save)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        first = c.read()
        second = c.read()
    assert F._same(first, fresh) and F._same(second, fresh)
    _assert_one_warning_and_no_entry(c, fresh, rec, os.strerror(err))
    assert list(c.root.iterdir()) == []  # the temporary folder was removed


def test_a_cache_root_under_a_regular_file(tmp_path):
    c, fresh = _fixture(tmp_path)
    (tmp_path / "plain").write_text("x")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        got = read_svmlight(c.data, cache=tmp_path / "plain" / "cache")
    assert F._same(got, fresh)
    msgs = [str(w.message) for w in rec if "cache" in str(w.message)]
    assert len(msgs) == 1 and "cannot be used" in msgs[0], msgs


def _mount_tmpfs(where: Path, opts: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


@pytest.mark.parametrize("opts", ["size=64k", "ro,size=64k"])
def test_a_real_full_or_read_only_filesystem(tmp_path, opts):
    """A 64 KiB tmpfs (the entry does not fit) and a read-only tmpfs, where mounting is allowed."""
    mnt = tmp_path / "mnt"
    if not _mount_tmpfs(mnt, opts):
        pytest.skip("cannot mount a tmpfs here (needs root in a namespace that allows mounts)")
    try:
        tmp = tmp_path / "data"
        tmp.mkdir()
        c = F.Case(tmp, sparse=False)
        big = "".join(F._dense_text(s) for s in range(1, 40))  # an entry of ~100 KiB
        c.data.write_text(big)
        fresh = read_svmlight(c.data)
        c.root = mnt / "cache"
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            got = [c.read() for _ in range(2)]
        assert all(F._same(g, fresh) for g in got)
        _assert_one_warning_and_no_entry(c, fresh, rec, "cannot be used")
        left = list(c.root.iterdir()) if c.root.exists() else []
        assert left == [], left
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True, timeout=30)


_WORKER = textwrap.dedent("""
    import sys, warnings, json
    sys.path.insert(0, {tests!r})
    import _cache_faults as F
    import rankwise.data.svmlight as S
    from rankwise.data import read_svmlight, _cache
    from pathlib import Path
    role, n = sys.argv[1], int(sys.argv[2])
    data, root = Path({data!r}), Path({root!r})
    fresh = read_svmlight(data)
    parses = [0]
    real = S._parse_bytes
    def counting(*a, **k):
        parses[0] += 1
        return real(*a, **k)
    S._parse_bytes = counting
    if role == "writer":  # never hits: parses and replaces the entry every time
        _cache.Entry.load = lambda self, group_file: None
    bad = 0
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for _ in range(n):
            bad += not F._same(read_svmlight(data, cache=root), fresh)
    print(json.dumps({{"role": role, "bad": bad, "parses": parses[0],
                      "warnings": [str(w.message)[:300] for w in rec]}}))
""")


def test_concurrent_readers_and_writers_never_see_a_half_written_entry(tmp_path):
    """Two writers replace the entry again and again while two readers read through the cache:
    every read equals a fresh parse, no reader ever warns of a damaged entry."""
    import json

    c = F.Case(tmp_path, sparse=False)
    c.data.write_text("".join(F._dense_text(s) for s in range(1, 200)))  # ~2,000 rows, ~600 KiB
    read_svmlight(c.data, cache=c.root)
    script = tmp_path / "worker.py"
    script.write_text(_WORKER.format(tests=str(Path(F.__file__).parent), data=str(c.data), root=str(c.root)))
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(F.SRC))
    procs = [subprocess.Popen([sys.executable, str(script), role, str(n)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
             for role, n in (("writer", 40), ("reader", 120), ("writer", 40), ("reader", 120))]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    for o in outs:
        assert o["bad"] == 0, o
        assert o["warnings"] == [], o
    readers = [o for o in outs if o["role"] == "reader"]
    writers = [o for o in outs if o["role"] == "writer"]
    assert all(o["parses"] == 40 for o in writers)
    # the readers were served from the cache (not only parsing): at most a few misses while an
    # entry was being swapped
    assert all(o["parses"] < 120 for o in readers), readers
    assert sorted(p.name for p in c.root.iterdir()) == [c.entry.name]  # no temporary folder left


def test_saved_dataset_digests_and_structure_are_checked_by_load(tmp_path):
    """RankingDataset.load itself refuses a damaged array (digest) and a CSR whose indices are out of
    range even when the digests were recomputed (structure), before any kernel sees them."""
    import scipy.sparse as sp

    from rankwise.errors import InputError

    X = sp.random(6, 50, density=0.2, format="csr", dtype=np.float32, random_state=0)
    ds = RankingDataset.from_arrays(X, [0.0, 1, 2, 0, 1, 2], [1, 1, 1, 2, 2, 2])
    ds.save(tmp_path / "d")
    back = RankingDataset.load(tmp_path / "d")
    assert (back.X != ds.X).nnz == 0
    ind = np.load(tmp_path / "d" / "X_indices.npy")
    ind[0] = 10**6
    np.save(tmp_path / "d" / "X_indices.npy", ind)
    with pytest.raises(InputError, match="X_indices.npy does not match the digest"):
        RankingDataset.load(tmp_path / "d")
    F._forge_digests(tmp_path / "d")
    with pytest.raises(InputError, match=r"a column index in X_indices.npy is outside \[0, 50\)"):
        RankingDataset.load(tmp_path / "d")
    with pytest.raises(InputError, match=r"outside \[0, 50\)"):
        RankingDataset.load(tmp_path / "d", verify=False)


def test_hash_fallback_keeps_working(tmp_path, monkeypatch):
    """Without xxhash the digests are SHA-256; an entry written with the other algorithm is
    rebuilt quietly (not a fault)."""
    c, fresh = _fixture(tmp_path)
    c.read()
    monkeypatch.setattr(_cache, "xxhash", None)
    assert _cache.digest_algorithm() == "sha256"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert F._same(c.read(), fresh)
        assert F._same(c.read(), fresh)
