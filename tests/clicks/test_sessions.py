"""session_dataset: a click log as a ranking data set, one group per session, rows in rank order."""
from __future__ import annotations

import numpy as np
import pytest

from rankwise.clicks import ClickLog, read_click_log, session_dataset
from rankwise.data import RankingDataset
from rankwise.errors import InputError


def _features(q_docs, seed=0):
    """A feature set with NaN and scientific-notation values for {query: [doc, ...]}."""
    rng = np.random.default_rng(seed)
    qid, doc = zip(*[(q, d) for q, ds in q_docs.items() for d in ds])
    X = rng.normal(scale=1e-3, size=(len(qid), 4)) * 10.0 ** rng.integers(-5, 6, size=(len(qid), 4))
    X[rng.random(X.shape) < 0.1] = np.nan
    return RankingDataset.from_arrays(X.astype(np.float32), np.zeros(len(qid)), list(qid), doc_ids=list(doc),
                                      feature_names=["a", "b", "c", "d"])


def _naive(log, feats):
    """Row by row: session s, rank k -> (group s, position k) with the feature row of (query, doc)."""
    fq = np.repeat(feats.query_ids, np.diff(feats.query_offsets)).astype(str)
    where = {(q, d): i for i, (q, d) in enumerate(zip(fq, feats.doc_ids))}
    X, y, g, ids = [], [], [], []
    for s in range(log.n_sessions):
        q = str(log.queries[log.query[s]])
        for r in range(log.session_offsets[s], log.session_offsets[s + 1]):
            d = str(log.docs[log.doc[r]])
            X.append(feats.X[where[(q, d)]])
            y.append(log.clicked[r])
            g.append(s)
            ids.append(d)
    return np.array(X), np.array(y, float), np.array(g), np.array(ids)


def _check(log, feats):
    ds = session_dataset(log, feats)
    X, y, g, ids = _naive(log, feats)
    assert ds.n_queries == log.n_sessions
    np.testing.assert_array_equal(ds.query_offsets, log.session_offsets)
    np.testing.assert_array_equal(ds.qid, g)
    np.testing.assert_array_equal(ds.X, X)  # NaN in the same places
    np.testing.assert_array_equal(ds.labels, y)
    np.testing.assert_array_equal(ds.doc_ids, ids)
    assert ds.feature_names == feats.feature_names
    return ds


def test_rows_in_rank_order_with_the_clicks_as_labels():
    docs = [["x", "y", "z"], ["z", "x"], ["y", "x", "z"], ["u", "v"]]
    clicks = [[1, 0, 1], [0, 1], [0, 0, 0], [0, 1]]
    log = ClickLog.from_arrays(["q", "q", "q", "p"], docs, clicks)
    feats = _features({"p": ["v", "u", "w"], "q": ["z", "y", "x", "t"]})
    ds = _check(log, feats)
    # rank = position in its group, 1-based
    np.testing.assert_array_equal(np.arange(len(ds)) - np.repeat(ds.query_offsets[:-1], ds.query_sizes) + 1,
                                  log.ranks)


def test_same_doc_id_under_two_queries_gets_each_querys_row():
    log = ClickLog.from_arrays(["q1", "q2"], [["d", "e"], ["e", "d"]], [[1, 0], [0, 1]])
    feats = _features({"q1": ["d", "e"], "q2": ["d", "e"]}, seed=3)
    ds = _check(log, feats)
    assert not np.array_equal(ds.X[0], ds.X[3], equal_nan=True)


def test_documents_as_row_numbers_when_the_features_have_no_doc_ids():
    feats = RankingDataset.from_arrays(np.arange(10, dtype=np.float32).reshape(5, 2), np.zeros(5), [1, 1, 1, 2, 2])
    log = ClickLog.from_arrays([1, 2, 1], [[2, 0], [4, 3], [1, 2, 0]], [[0, 1], [1, 1], [0, 0, 1]])
    ds = session_dataset(log, feats)
    np.testing.assert_array_equal(ds.X[:, 0], [4, 0, 8, 6, 2, 4, 0])
    np.testing.assert_array_equal(ds.doc_ids, ["2", "0", "4", "3", "1", "2", "0"])


def test_long_lists_from_a_crlf_csv_log(tmp_path):
    """A long table written with CRLF line ends, 60-document pages, sessions given out of row order."""
    rng = np.random.default_rng(5)
    docs = {f"q{i}": [f"doc-{i}-{j}" for j in range(80)] for i in range(3)}
    lines = ["session,query,rank,doc,clicked"]
    for s in range(12):
        q = f"q{s % 3}"
        shown = rng.permutation(docs[q])[:60]
        for r in rng.permutation(60):
            lines.append(f"{s},{q},{r + 1},{shown[r]},{int(rng.random() < 0.2)}")
    path = tmp_path / "log.csv"
    path.write_bytes(("\r\n".join(lines) + "\r\n").encode())
    log = read_click_log(path, format="csv")
    assert log.max_rank == 60
    _check(log, _features(docs, seed=1))


def test_yandex_sample_with_features(data_dir):
    path = data_dir / "yandex_clicks" / "sessions.txt"
    if not path.exists():
        pytest.skip(f"Yandex click sample absent: expected {path}")
    log = read_click_log(path, format="yandex_sample").subset(np.arange(0, 35064, 97))
    q, d = log.pair_keys()
    q_docs = {}
    for a, b in zip(np.asarray(q).astype(str), np.asarray(d).astype(str)):
        q_docs.setdefault(a, []).append(b)
    ds = _check(log, _features(q_docs, seed=2))
    assert ds.labels.sum() == log.clicked.sum() > 0


def test_a_log_document_missing_from_the_features_is_named():
    log = ClickLog.from_arrays(["q", "q"], [["x", "y"], ["x", "nope"]], [[1, 0], [0, 0]])
    with pytest.raises(InputError, match=r"\(query 'q', doc 'nope'\).*no row in the feature data set"):
        session_dataset(log, _features({"q": ["x", "y"]}))


def test_wrong_types_are_named():
    log = ClickLog.from_arrays(["q"], [["x"]], [[1]])
    with pytest.raises(InputError, match="log must be a rankwise.data.ClickLog.*ClickCounts"):
        session_dataset(log.counts(), _features({"q": ["x"]}))
    with pytest.raises(InputError, match="features must be a rankwise.data.RankingDataset"):
        session_dataset(log, np.zeros((1, 2)))


def test_gather_rows_equals_fancy_indexing_bit_for_bit():
    """The byte-wise gather of session_dataset: float32 rows with NaN, -0.0 and denormals, strings of several
    lengths (with trailing spaces), a sparse matrix and an empty one, against numpy's ``a[rows]``."""
    import scipy.sparse

    from rankwise.clicks.sessions import _gather_rows

    rng = np.random.default_rng(5)
    X = (rng.normal(size=(7, 3)) * 10.0 ** rng.integers(-40, 30, size=(7, 3))).astype(np.float32)
    X[1, 2], X[2, 0], X[3, 1] = np.nan, -0.0, 1e-45
    rows = rng.integers(0, 7, 50)
    got = _gather_rows(X, rows)
    assert got.dtype == X.dtype and got.shape == (50, 3)
    assert got.tobytes() == X[rows].tobytes()
    words = np.array(["a", "doc 12 ", "ü", "", "GX000-00-0000000"])
    assert _gather_rows(words, rows % 5).tolist() == words[rows % 5].tolist()
    S = scipy.sparse.csr_matrix(X)
    np.testing.assert_array_equal(_gather_rows(S, rows).toarray(), S[rows].toarray())  # NaN equal
    assert _gather_rows(np.zeros((0, 3), np.float32), np.zeros(0, np.int64)).shape == (0, 3)
