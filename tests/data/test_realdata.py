"""Every file of ../shared/data (or $RANKWISE_DATA) loads with the counts recorded in SOURCES.md,
and agrees with scikit-learn's and LightGBM's own loaders."""
from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp

from rankwise.data import concat, read_svmlight

pytestmark = pytest.mark.realdata

FOLD_FILES = [f"Fold{k}/{s}.txt.gz" for k in range(1, 6) for s in ("train", "vali", "test")]


def sources_counts(data_dir):
    """The 'verified contents' column of SOURCES.md: {relative path: dict}."""
    text = (data_dir / "SOURCES.md").read_text()
    out = {}
    for m in re.finditer(r"^\| `(MQ2008/Fold\d/\w+\.txt\.gz)` \|.*?\| docs=(\d+) queries=(\d+) features=(\d+) "
                         r"labels=([\d:,]+) \|", text, re.M):
        labels = {int(a): int(b) for a, b in (kv.split(":") for kv in m.group(5).split(","))}
        out[m.group(1)] = dict(docs=int(m.group(2)), queries=int(m.group(3)), features=int(m.group(4)),
                               labels=labels)
    return out


@pytest.fixture(scope="module")
def mq_all(mq2008_dir):
    return {f: read_svmlight(mq2008_dir / f) for f in FOLD_FILES}


def test_sources_md_lists_all_fold_files(data_dir):
    assert sorted(sources_counts(data_dir)) == sorted(f"MQ2008/{f}" for f in FOLD_FILES)


@pytest.mark.parametrize("fname", FOLD_FILES)
def test_mq2008_counts_match_sources(data_dir, mq_all, fname):
    want = sources_counts(data_dir)[f"MQ2008/{fname}"]
    ds = mq_all[fname]
    s = ds.summary()
    assert (s["rows"], s["queries"], s["features"]) == (want["docs"], want["queries"], want["features"])
    assert s["labels"] == want["labels"]
    assert not sp.issparse(ds.X) and ds.doc_ids is not None and ds.regrouped_rows == 0
    assert all(d.startswith("GX") for d in ds.doc_ids[:50])


def test_mq2008_union_totals(mq_all):
    """SOURCES.md: 15,211 docs, 784 queries, labels 12,279/2,001/931, 220 queries without a relevant doc,
    list lengths 5..121 (median 8)."""
    full = concat([mq_all["Fold1/train.txt.gz"], mq_all["Fold1/vali.txt.gz"], mq_all["Fold1/test.txt.gz"]])
    s = full.summary()
    assert s["rows"] == 15211 and s["queries"] == 784
    assert s["labels"] == {0: 12279, 1: 2001, 2: 931}
    assert s["queries_without_relevant"] == 220
    assert s["list_length"] == {"min": 5, "median": 8.0, "max": 121}


@pytest.mark.parametrize("fname", FOLD_FILES[:3])
def test_mq2008_matches_sklearn(mq2008_dir, mq_all, fname):
    from sklearn.datasets import load_svmlight_file

    X, y, q = load_svmlight_file(str(mq2008_dir / fname), query_id=True, dtype=np.float32, zero_based=False)
    ds = mq_all[fname]
    np.testing.assert_array_equal(ds.X, X.toarray())
    np.testing.assert_array_equal(ds.labels, y)
    np.testing.assert_array_equal(ds.qid, q)


def test_lightgbm_sample_counts_and_peer(data_dir):
    d = data_dir / "lightgbm_lambdarank"
    tr = read_svmlight(d / "rank.train")
    te = read_svmlight(d / "rank.test")
    assert (len(tr), tr.n_queries) == (3005, 201) and (len(te), te.n_queries) == (768, 50)
    assert tr.summary()["labels"] == {0: 645, 1: 1211, 2: 858, 3: 222, 4: 69}
    assert te.summary()["labels"] == {0: 206, 1: 256, 2: 252, 3: 44, 4: 10}
    assert tr.query_sizes.min() == 1 and tr.query_sizes.max() == 27
    assert te.query_sizes.min() == 6 and te.query_sizes.max() == 24
    assert sp.issparse(tr.X) and tr.n_features == 300
    # LightGBM's own loader: same labels, same group sizes, same feature values
    import lightgbm as lgb

    ref = lgb.Dataset(str(d / "rank.train"), params={"verbosity": -1}).construct()
    np.testing.assert_array_equal(ref.get_label(), tr.labels.astype(np.float32))
    np.testing.assert_array_equal(np.diff(ref.get_field("group")), tr.query_sizes)
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(d / "rank.train"), dtype=np.float32, zero_based=False, n_features=300)
    assert (tr.X != X).nnz == 0
