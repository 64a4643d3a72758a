"""make_synthetic, load_movielens_100k, from_events and fetch."""
from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
import zipfile
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from rankwise.data import fetch, from_events, load_movielens_100k, make_synthetic
from rankwise.errors import DataNotFoundError, InputError

import rankwise.data.fetchers as fetch_mod


# ---------------------------------------------------------------- synthetic
def test_synthetic_reproducible_and_mslr_shaped():
    a = make_synthetic(300, seed=7)
    b = make_synthetic(300, seed=7)
    c = make_synthetic(300, seed=8)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert not np.array_equal(a.labels, c.labels[: len(a.labels)]) or len(a) != len(c)
    assert a.n_features == 136 and a.X.dtype == np.float32
    assert set(np.unique(a.labels)) <= {0, 1, 2, 3, 4}
    assert a.query_sizes.min() >= 1 and a.query_sizes.max() <= 1300
    big = make_synthetic(3000, seed=0, n_features=4)
    sizes = big.query_sizes
    assert sizes.min() == 1 and sizes.max() > 500  # long tail
    assert 70 <= np.median(sizes) <= 110
    # the label histogram follows the MSLR shares
    share = np.bincount(big.labels.astype(int), minlength=5) / len(big)
    np.testing.assert_allclose(share, [0.514, 0.325, 0.134, 0.019, 0.008], atol=0.03)


def test_synthetic_truth_is_the_generating_function():
    ds = make_synthetic(200, seed=3, n_features=10, n_informative=4, n_pairs=2, noise=0.7)
    t = ds.truth
    # score(X) written out from the definition f(x) = w.x + sum_k c_k x_a x_b
    X = ds.X.astype(np.float64)
    f = X @ t.weights + sum(c * X[:, a] * X[:, b] for (a, b), c in zip(t.pairs, t.pair_coef))
    np.testing.assert_allclose(ds.true_scores, f, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(t.score(ds.X), f, rtol=1e-12, atol=1e-12)
    assert np.count_nonzero(t.weights) == 4
    # label_proba: ordinal probit, rows sum to 1, and matches the empirical frequencies
    P = t.label_proba(ds.X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    g = 2
    direct = norm.cdf((t.thresholds[g] - f) / t.noise) - norm.cdf((t.thresholds[g - 1] - f) / t.noise)
    np.testing.assert_allclose(P[:, g], direct, atol=1e-12)
    emp = np.bincount(ds.labels.astype(int), minlength=5) / len(ds)
    np.testing.assert_allclose(emp, P.mean(axis=0), atol=4 * np.sqrt(0.25 / len(ds)))
    # labels correlate with f; noise=0 makes labels a deterministic function of f
    d0 = make_synthetic(50, seed=3, noise=0.0, n_features=10)
    assert np.array_equal(d0.labels, np.searchsorted(d0.truth.thresholds, d0.true_scores, side="right"))


def test_synthetic_bad_args():
    with pytest.raises(InputError, match="n_queries must be an integer >= 1"):
        make_synthetic(0)
    with pytest.raises(InputError, match="list_length must be"):
        make_synthetic(5, list_length="long")
    with pytest.raises(InputError, match="label_shares must be 5 positive numbers"):
        make_synthetic(5, label_shares=[1, 2])


# ---------------------------------------------------------------- MovieLens
@pytest.fixture(scope="module")
def ml_dir(data_dir):
    d = data_dir / "ml-100k"
    if not (d / "u.data").exists():
        pytest.skip(f"MovieLens 100k absent: expected {d}/u.data")
    return d


def test_movielens_split_counts_and_features(ml_dir):
    tr, te = load_movielens_100k(ml_dir, split="u1")
    assert len(tr) == 80000 and len(te) == 20000
    assert tr.n_queries == 943 and tr.n_features == 23
    assert set(np.unique(tr.labels)) == {1, 2, 3, 4, 5}
    names = tr.feature_names
    assert names[:19] == [f"genre_{g}" for g in (
        "unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime", "Documentary", "Drama",
        "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller", "War", "Western")]
    # features recomputed naively from u1.base only (no test leakage)
    base = pd.read_csv(ml_dir / "u1.base", sep="\t", names=["u", "i", "r", "t"])
    item_mean = base.groupby("i")["r"].mean()
    item_cnt = base.groupby("i")["r"].size()
    user_mean = base.groupby("u")["r"].mean()
    gmean = base["r"].mean()
    k_im, k_ic, k_um = names.index("item_mean_rating"), names.index("item_rating_count"), names.index("user_mean_rating")
    items = te.doc_ids.astype(int)
    want_im = np.array([item_mean.get(i, gmean) for i in items], dtype=np.float32)
    want_ic = np.array([item_cnt.get(i, 0) for i in items], dtype=np.float32)
    np.testing.assert_array_equal(te.X[:, k_im], want_im)
    np.testing.assert_array_equal(te.X[:, k_ic], want_ic)
    np.testing.assert_array_equal(te.X[:, k_um], user_mean.loc[te.qid].to_numpy().astype(np.float32))
    assert np.all(np.isfinite(tr.X)) and np.all(np.isfinite(te.X))
    # release year of Toy Story (item 1): 01-Jan-1995
    row = np.flatnonzero(tr.doc_ids == "1")[0]
    assert tr.X[row, names.index("release_year")] == 1995 and tr.X[row, names.index("genre_Animation")] == 1
    # item 267 has no release date: it gets the mean release year of the items rated in u1.base
    # (not of every item: that would use the test part)
    info = pd.read_csv(ml_dir / "u.item", sep="|", header=None, encoding="latin-1")
    year = pd.to_numeric(info[2].astype(str).str[-4:], errors="coerce")
    assert year[info[0] == 267].isna().all()
    want_year = np.float32(year[info[0].isin(base["i"].unique())].mean())
    assert want_year != np.float32(year.mean())  # the two rules really differ on this split
    for part in (tr, te):
        rows = np.flatnonzero(part.doc_ids == "267")
        assert len(rows) and np.all(part.X[rows, names.index("release_year")] == want_year)


def test_movielens_bad_split(ml_dir):
    with pytest.raises(InputError, match="split must be one of"):
        load_movielens_100k(ml_dir, split="u9")


# ---------------------------------------------------------------- events
def test_from_events_rules():
    f = pd.DataFrame({"user": ["x", "x", "y", "x", "y", "y", "x"],
                      "item": [1, 2, 1, 1, 3, 3, 2],
                      "ok": ["fail", "success", "fail", "fail", "success", "fail", "fail"],
                      "t": [5, 1, 2, 0, 3, 4, 9],
                      "price": [1.0, 2.0, 3.0, 5.0, 4.0, 6.0, 8.0]})
    ds = from_events(f, user="user", item="item", outcome="ok", features=["price"])
    assert ds.query_ids.tolist() == ["x", "y"]
    assert ds.doc_ids.tolist() == ["1", "2", "1", "3"]
    assert ds.labels.tolist() == [0, 1, 0, 1]  # "any": x-2 has a success, y-3 has one
    assert ds.X[:, 0].tolist() == [3.0, 5.0, 3.0, 5.0]  # mean price per pair
    last = from_events(f, user="user", item="item", outcome="ok", rule="last", time="t")
    assert last.labels.tolist() == [0, 0, 0, 0]  # last x-2 event (t=9) failed, last y-3 (t=4) failed
    maj = from_events(f.assign(ok=[0, 1, 0, 0, 1, 1, 1]), user="user", item="item", outcome="ok", rule="majority")
    assert maj.labels.tolist() == [0, 1, 0, 1]
    assert maj.n_features == 0


def test_from_events_errors():
    f = pd.DataFrame({"u": [1], "i": [1], "o": ["maybe"]})
    with pytest.raises(InputError, match="outcome column 'o' has value 'maybe'"):
        from_events(f, user="u", item="i", outcome="o")
    with pytest.raises(InputError, match=r"columns \['z'\] are not in the frame"):
        from_events(f, user="u", item="z", outcome="o")
    with pytest.raises(InputError, match="rule must be one of"):
        from_events(f.assign(o=1), user="u", item="i", outcome="o", rule="first")


# ---------------------------------------------------------------- fetch
def _offline(*a, **k):
    raise urllib.error.URLError("no network")


def test_fetch_cache_hit_on_shared_layout(data_dir, monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", _offline)
    assert fetch("mq2008", cache_dir=data_dir) == data_dir / "MQ2008"
    monkeypatch.setenv("RANKWISE_DATA", str(data_dir))
    assert fetch("movielens-100k") == data_dir / "ml-100k"


def test_fetch_offline_message_says_what_to_put_where(tmp_path, monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", _offline)
    with pytest.raises(DataNotFoundError) as info:
        fetch("mslr-web10k", cache_dir=tmp_path)
    msg = str(info.value)
    assert "could not be downloaded (offline or unreachable: no network)" in msg
    assert str(tmp_path / "MSLR-WEB10K" / "Fold1" / "train.txt") in msg
    assert "MSLR-WEB10K.zip" in msg and "RANKWISE_DATA" in msg
    with pytest.raises(DataNotFoundError, match="download=False"):
        fetch("mq2007", cache_dir=tmp_path, download=False)
    with pytest.raises(InputError, match="unknown data set 'letor9'"):
        fetch("letor9", cache_dir=tmp_path)


def test_fetch_detects_corrupt_cached_file(ml_dir, tmp_path):
    shutil.copytree(ml_dir, tmp_path / "ml-100k")
    (tmp_path / "ml-100k" / "u1.test").chmod(0o644)
    with open(tmp_path / "ml-100k" / "u1.test", "ab") as fh:
        fh.write(b"1\t1\t5\t0\n")
    with pytest.raises(DataNotFoundError, match=r"u1.test: sha256 .* does not match"):
        fetch("movielens-100k", cache_dir=tmp_path)


def test_fetch_downloads_extracts_and_pins_sha(tmp_path, monkeypatch):
    """A real urllib download (file:// URL), zip extraction, trust-on-first-use sha256 record."""
    src = tmp_path / "src"
    (src / "Fold1").mkdir(parents=True)
    files = [f"Fold{k}/{n}.txt" for k in range(1, 6) for n in ("train", "vali", "test")]
    archive = tmp_path / "pub.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in files:
            zf.writestr(f, "1 qid:1 1:0.5\n")
    spec = replace(fetch_mod.DATASETS["mslr-web10k"], url=archive.as_uri())
    monkeypatch.setitem(fetch_mod.DATASETS, "mslr-web10k", spec)
    root = tmp_path / "cache"
    out = fetch("mslr-web10k", cache_dir=root)
    assert out == root / "MSLR-WEB10K" and (out / "Fold3" / "vali.txt").exists()
    pinned = json.loads((root / ".rankwise-sha256.json").read_text())
    assert len(pinned["MSLR-WEB10K.zip"]) == 64
    # the publisher's file changes: the next download no longer matches the pinned digest
    shutil.rmtree(root / "MSLR-WEB10K")
    with zipfile.ZipFile(archive, "w") as zf:
        for f in files:
            zf.writestr(f, "2 qid:1 1:0.5\n")
    with pytest.raises(DataNotFoundError, match="has sha256 .* expected .*refusing"):
        fetch("mslr-web10k", cache_dir=root)


@pytest.mark.parametrize("split, n_train, n_test", [(f"u{k}", 80000, 20000) for k in range(1, 6)]
                         + [("ua", 90570, 9430), ("ub", 90570, 9430)])
def test_movielens_every_split_matches_sources(ml_dir, split, n_train, n_test):
    """SOURCES.md: 100,000 ratings, 943 users, 1,682 items, ratings 1-5: 6,110/11,370/27,145/34,174/21,201."""
    tr, te = load_movielens_100k(ml_dir, split=split)
    assert (len(tr), len(te)) == (n_train, n_test)
    labels = np.concatenate([tr.labels, te.labels]).astype(int)
    assert np.bincount(labels, minlength=6)[1:].tolist() == [6110, 11370, 27145, 34174, 21201]
    users = np.union1d(tr.query_ids, te.query_ids)
    items = np.union1d(tr.doc_ids.astype(int), te.doc_ids.astype(int))
    assert (len(users), users.min(), users.max()) == (943, 1, 943)
    assert (len(items), items.min(), items.max()) == (1682, 1, 1682)
    if split in ("ua", "ub"):
        assert np.all(te.query_sizes == 10)
