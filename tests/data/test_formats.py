"""TREC qrels/run files (cross-checked with pytrec_eval's parsers), pandas and Parquet."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from rankwise.data import (RankingDataset, from_pandas, read_parquet, read_trec_qrels, read_trec_run, to_pandas,
                           write_parquet, write_trec_qrels, write_trec_run)
from rankwise.errors import InputError, ParseError


def ds_small():
    X = np.arange(10, dtype=np.float32).reshape(5, 2)
    return RankingDataset.from_arrays(X, [2, 0, 1, 0, 3], ["q1", "q1", "q2", "q2", "q2"],
                                      doc_ids=["a", "b", "c", "d", "e"], feature_names=["x1", "x2"])


def test_qrels_round_trip_and_pytrec_eval(tmp_path):
    ds = ds_small()
    p = tmp_path / "qrels.txt"
    write_trec_qrels(ds, p)
    assert p.read_text().splitlines()[0] == "q1 0 a 2"
    q = read_trec_qrels(p)
    assert q == {"q1": {"a": 2, "b": 0}, "q2": {"c": 1, "d": 0, "e": 3}}
    import pytrec_eval

    with open(p) as fh:
        assert pytrec_eval.parse_qrel(fh) == q
    write_trec_qrels(q, tmp_path / "again.txt")
    assert (tmp_path / "again.txt").read_text() == p.read_text()


def test_run_order_ranks_and_pytrec_eval(tmp_path):
    ds = ds_small()
    scores = np.array([0.5, 0.5, 0.1, 0.9, 0.9])
    p = tmp_path / "run.txt"
    write_trec_run(ds, p, scores=scores, tag="t1")
    lines = [ln.split() for ln in p.read_text().splitlines()]
    # score descending, then docno descending (trec_eval's order), ranks 1.. in that order
    assert [(f[0], f[2], f[3]) for f in lines] == [("q1", "b", "1"), ("q1", "a", "2"),
                                                   ("q2", "e", "1"), ("q2", "d", "2"), ("q2", "c", "3")]
    run = read_trec_run(p)
    assert run == {"q1": {"a": 0.5, "b": 0.5}, "q2": {"c": 0.1, "d": 0.9, "e": 0.9}}
    import pytrec_eval

    write_trec_qrels(ds, tmp_path / "qrels.txt")
    qrels = read_trec_qrels(tmp_path / "qrels.txt")
    with open(tmp_path / "qrels.txt") as fq, open(p) as fr:
        peer_q = pytrec_eval.parse_qrel(fq)
        peer_r = pytrec_eval.parse_run(fr)
    assert peer_q == qrels and peer_r == run


@pytest.mark.parametrize("text, reader, pattern", [
    ("q1 0 a\n", read_trec_qrels, r":1: 3 fields; a qrels line has 4"),
    ("q1 0 a x\n", read_trec_qrels, r":1: relevance 'x' is not an integer"),
    ("q1 0 a 1\nq1 0 a 2\n", read_trec_qrels, r":2: document 'a' of query 'q1' is judged twice"),
    ("\n", read_trec_qrels, r"empty qrels file"),
    ("q1 Q0 a 1 0.5\n", read_trec_run, r":1: 5 fields; a run line has 6"),
    ("q1 Q0 a one 0.5 t\n", read_trec_run, r":1: rank 'one' is not an integer"),
    ("q1 Q0 a 1 high t\n", read_trec_run, r":1: score 'high' is not a number"),
    ("q1 Q0 a 1 nan t\n", read_trec_run, r":1: score 'nan' is not finite"),
    ("q1 Q0 a 1 1 t\nq1 Q0 a 2 0 t\n", read_trec_run, r":2: document 'a' appears twice for query 'q1'"),
    ("", read_trec_run, r"empty run file"),
])
def test_trec_malformed(tmp_path, text, reader, pattern):
    p = tmp_path / "f.txt"
    p.write_text(text)
    with pytest.raises(ParseError, match=pattern) as info:
        reader(p)
    assert str(info.value).startswith(str(p))


def test_trec_writer_rejects_bad_input(tmp_path):
    ds = ds_small()
    with pytest.raises(InputError, match="scores is required"):
        write_trec_run(ds, tmp_path / "r.txt")
    with pytest.raises(InputError, match="one entry per row"):
        write_trec_run(ds, tmp_path / "r.txt", scores=[1.0])
    with pytest.raises(InputError, match="doc id 'a b' cannot be written"):
        write_trec_qrels({"q": {"a b": 1}}, tmp_path / "q.txt")


@pytest.mark.parametrize("sparse", [False, True])
def test_pandas_round_trip(sparse):
    ds = ds_small()
    if sparse:
        ds = RankingDataset.from_arrays(sp.csr_matrix(ds.X), ds.labels, ds.qid, doc_ids=ds.doc_ids,
                                        feature_names=ds.feature_names)
    df = to_pandas(ds)
    assert list(df.columns) == ["qid", "label", "doc_id", "x1", "x2"]
    back = from_pandas(df)
    assert sp.issparse(back.X) == sparse  # pandas sparse columns come back as CSR, not densified
    Xb = back.X.toarray() if sp.issparse(back.X) else back.X
    Xa = ds.X.toarray() if sparse else ds.X
    np.testing.assert_array_equal(Xb, Xa)
    assert back.qid.tolist() == ds.qid.tolist() and back.doc_ids.tolist() == ds.doc_ids.tolist()
    np.testing.assert_array_equal(back.labels, ds.labels)


def test_from_pandas_sparse_columns_build_csr():
    rng = np.random.default_rng(0)
    dense = sp.random(40, 6, density=0.15, random_state=1, dtype=np.float32).toarray()
    dense[2, 5] = np.nan  # a stored NaN: a missing value, kept
    X = sp.csr_matrix(dense)
    ds = RankingDataset.from_arrays(X, rng.integers(0, 3, 40), np.repeat(np.arange(8), 5))
    df = to_pandas(ds)
    back = from_pandas(df)
    assert sp.issparse(back.X) and back.X.shape == (40, 6)
    np.testing.assert_array_equal(back.X.toarray(), ds.X.toarray())
    # one dense column among sparse ones, and a sparse column whose fill value is NaN
    df["f1"] = df["f1"].sparse.to_dense()
    df["f2"] = pd.arrays.SparseArray(df["f2"].sparse.to_dense().replace(0.0, np.nan), fill_value=np.nan)
    mixed = from_pandas(df)
    want = ds.X.toarray()
    want[:, 2] = np.where(want[:, 2] == 0, np.nan, want[:, 2])
    assert sp.issparse(mixed.X)
    np.testing.assert_array_equal(mixed.X.toarray(), want)


def test_pandas_regroups_and_errors():
    df = pd.DataFrame({"q": [1, 2, 1], "rel": [1, 0, 2], "f": [0.1, 0.2, 0.3], "name": ["x", "y", "z"]})
    with pytest.warns(UserWarning, match="the rows of query 1 are not contiguous; 2 of 3 rows were regrouped"):
        ds = from_pandas(df, qid="q", label="rel")
    assert ds.feature_names == ["f"] and ds.regrouped_rows == 2 and ds.labels.tolist() == [1, 2, 0]
    with pytest.raises(InputError, match="qid='qid' is not a column"):
        from_pandas(df)
    with pytest.raises(InputError, match=r"feature columns must be numeric; \['name'\]"):
        from_pandas(df, qid="q", label="rel", features=["f", "name"])
    with pytest.raises(InputError, match="rows of query 1 are not contiguous"):
        from_pandas(df, qid="q", label="rel", strict=True)
    bad = df.assign(rel=[1, None, 2])
    with pytest.raises(InputError, match="label column 'rel' has 1 missing values"):
        from_pandas(bad, qid="q", label="rel")


def test_parquet_round_trip(tmp_path):
    ds = ds_small()
    p = tmp_path / "d.parquet"
    write_parquet(ds, p)
    back = read_parquet(p)
    np.testing.assert_array_equal(back.X, ds.X)
    assert back.query_ids.tolist() == ["q1", "q2"] and back.feature_names == ["x1", "x2"]
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match="not a readable Parquet file"):
        read_parquet(tmp_path / "bad.parquet")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 1e39])
def test_events_refuse_non_finite_features(bad):
    import pandas as pd

    from rankwise.data import from_events
    from rankwise.errors import InputError

    frame = pd.DataFrame({"u": [1, 1, 2], "i": ["a", "b", "a"], "o": [1, 0, 1], "f": [0.5, bad, 1.0]})
    import re

    with pytest.raises(InputError, match=re.escape(f"feature column 'f' has {bad!r} at row 1; features must be finite")):
        from_events(frame, user="u", item="i", outcome="o", features=["f"])
