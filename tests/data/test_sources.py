"""make_synthetic, from_events and fetch (MovieLens readers: tests/data/test_movielens.py)."""
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

from rankwise.data import fetch, from_events, make_synthetic
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


def _naive_events(frame, rule, time=None):
    """Per (user, item) pair, straight from the rule's words: users in order of first appearance, items in
    order of first appearance within the user; labels, and the mean of feature ``f``."""
    order = list(range(len(frame)))
    if rule == "last" and time is not None:
        order = sorted(order, key=lambda r: (frame[time].iloc[r], r))
    events = {}
    for r in order:
        events.setdefault((frame["u"].iloc[r], frame["i"].iloc[r]), []).append(r)
    users = list(dict.fromkeys(frame["u"]))
    out = []
    for u in users:
        items = list(dict.fromkeys(frame["i"][frame["u"] == u]))
        for i in items:
            rows = events[(u, i)]
            oks = [int(frame["o"].iloc[r]) for r in rows]
            label = {"any": max(oks), "last": oks[-1], "majority": int(sum(oks) > len(oks) / 2)}[rule]
            out.append((u, str(i), label, np.mean([frame["f"].iloc[r] for r in rows])))
    return out


@pytest.mark.parametrize("rule", ["any", "last", "majority"])
def test_from_events_is_the_click_log_rule_against_a_naive_loop(rule):
    rng = np.random.default_rng(3)
    n = 400
    frame = pd.DataFrame({"u": rng.choice(["u7", "u1", "u30", "u2"], n), "i": rng.integers(0, 25, n),
                          "o": rng.integers(0, 2, n), "f": rng.normal(size=n) * 1e-7,
                          "t": rng.integers(0, 40, n)})  # repeated time stamps: ties keep file order
    ds = from_events(frame, user="u", item="i", outcome="o", features=["f"], rule=rule,
                     time="t" if rule == "last" else None)
    want = _naive_events(frame, rule, "t" if rule == "last" else None)
    assert list(ds.qid) == [w[0] for w in want]
    assert list(ds.doc_ids) == [w[1] for w in want]
    np.testing.assert_array_equal(ds.labels, [w[2] for w in want])
    np.testing.assert_allclose(ds.X[:, 0], np.array([w[3] for w in want], dtype=np.float32), rtol=1e-6)


def test_click_log_pair_labels_rules():
    from rankwise.data import ClickLog
    from rankwise.errors import InputError

    # query q: doc a shown in 3 sessions (clicked in the 1st and 2nd), doc b in 3 (clicked in the 3rd only)
    log = ClickLog.from_arrays(["q", "q", "q", "r"], [["a", "b"], ["b", "a"], ["a", "b"], ["a"]],
                               [[1, 0], [0, 1], [0, 1], [0]])
    q, d = log.pair_keys()
    got = {rule: dict(zip(zip(q, d), log.pair_labels(rule))) for rule in ("any", "last", "majority", "ctr")}
    assert got["any"] == {("q", "a"): 1, ("q", "b"): 1, ("r", "a"): 0}
    assert got["last"] == {("q", "a"): 0, ("q", "b"): 1, ("r", "a"): 0}
    assert got["majority"] == {("q", "a"): 1, ("q", "b"): 0, ("r", "a"): 0}
    assert got["ctr"] == pytest.approx({("q", "a"): 2 / 3, ("q", "b"): 1 / 3, ("r", "a"): 0})
    # the order of sessions by a key: session 0 last
    last = dict(zip(zip(q, d), log.pair_labels("last", order=[9, 1, 2, 3])))
    assert last == {("q", "a"): 1, ("q", "b"): 0, ("r", "a"): 0}
    with pytest.raises(InputError, match="rule must be one of"):
        log.pair_labels("first")
    with pytest.raises(InputError, match="one sort key per session"):
        log.pair_labels("last", order=[1, 2])
