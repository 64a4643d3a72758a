"""read_svmlight / write_svmlight: against a naive reference parser, scikit-learn, and round trips."""
from __future__ import annotations

import gzip
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reference.data_reference import dense_from_rows, parse_svmlight_naive  # noqa: E402

from rankwise.data import RankingDataset, read_svmlight, write_svmlight  # noqa: E402
from rankwise.errors import ParseError  # noqa: E402

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _num_token(draw):
    """A decimal spelling of a number, in the many forms a LETOR file can hold."""
    kind = draw(st.sampled_from(["int", "fixed", "sci", "repr", "long", "lead"]))
    if kind == "int":
        return str(draw(st.integers(-10**6, 10**6)))
    if kind == "fixed":
        return f"{draw(st.floats(-1e4, 1e4, allow_nan=False)):.{draw(st.integers(0, 9))}f}"
    if kind == "sci":
        return f"{draw(st.floats(-1e30, 1e30, allow_nan=False)):.{draw(st.integers(0, 12))}e}"
    if kind == "repr":
        return repr(draw(st.floats(-1e30, 1e30, allow_nan=False, allow_subnormal=False)))
    if kind == "long":  # beyond the exact fast path: 20+ significant digits
        return "0." + "".join(str(draw(st.integers(0, 9))) for _ in range(25)) + "7"
    return draw(st.sampled_from(["+0.5", ".25", "5.", "-0", "1E3", "2e-30", "NULL", "nan"]))


@st.composite
def letor_text(draw):
    n_feat = draw(st.integers(1, 8))
    with_docid = draw(st.booleans())  # every line names its doc id, or none does
    lines = []
    for q in range(draw(st.integers(1, 4))):
        for _ in range(draw(st.integers(1, 4))):
            label = draw(st.sampled_from(["0", "1", "2", "4", "0.5", "-1", "3.25"]))
            cols = sorted(draw(st.sets(st.integers(1, n_feat), max_size=n_feat)))
            toks = [label, f"qid:{q * 7 + 3}"] + [f"{c}:{_num_token(draw)}" for c in cols]
            sep = draw(st.sampled_from([" ", "\t", "  "]))
            line = sep.join(toks)
            if with_docid:
                line += f" #docid = D{len(lines)} inc = 1"
            elif draw(st.booleans()):
                line += " # a comment without a doc id"
            lines.append(line)
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    return eol.join(lines) + draw(st.sampled_from(["", eol])), n_feat


@SETTINGS
@given(letor_text())
def test_matches_naive_reference_parser(tmp_path, text_nf):
    text, n_feat = text_nf
    p = tmp_path / "f.txt"
    p.write_bytes(text.encode())
    torn = {}
    if text and not text.endswith("\n"):  # a last line without a line break looks cut short: refused unless allowed
        with pytest.raises(ParseError, match=r":\d+: the last line has no line break .*allow_truncated=True"):
            read_svmlight(p, n_features=n_feat)
        torn = {"allow_truncated": True}
    ds = read_svmlight(p, n_features=n_feat, dense=True, **torn)
    rows, labels, qids, docs = parse_svmlight_naive(p)
    X = dense_from_rows(rows, n_feat)
    np.testing.assert_array_equal(ds.X, X)  # NaN == NaN in assert_array_equal
    assert ds.X.dtype == np.float32
    np.testing.assert_array_equal(ds.labels, np.array(labels))
    np.testing.assert_array_equal(ds.qid, np.array(qids))
    if any(d is not None for d in docs):
        assert ds.doc_ids.tolist() == docs
    else:
        assert ds.doc_ids is None
    # CSR reading gives the same entries
    dsc = read_svmlight(p, n_features=n_feat, dense=False, **torn)
    assert sp.issparse(dsc.X) and dsc.X.dtype == np.float32
    np.testing.assert_array_equal(dsc.X.toarray(), X)


def test_fast_path_equals_strtod_on_many_numbers(tmp_path):
    """Values and labels must be exactly what float() (strtod) gives, cast to float32 / kept float64."""
    rng = np.random.default_rng(0)
    vals = np.concatenate([rng.normal(size=3000) * 10.0 ** rng.integers(-25, 25, size=3000),
                           rng.integers(0, 10**7, size=1000) / 10.0 ** rng.integers(0, 9, size=1000)])
    spellings = [f"{v:.{k}g}" for v, k in zip(vals, rng.integers(1, 18, size=len(vals)))]
    labels = [s if abs(float(s)) <= 1023 else "0" for s in spellings]  # relevance labels lie in [-1023, 1023]
    lines = [f"{lab} qid:1 1:{s}" for lab, s in zip(labels, spellings)]
    p = tmp_path / "n.txt"
    p.write_text("\n".join(lines) + "\n")
    ds = read_svmlight(p)
    expect = np.array([float(s) for s in spellings])
    np.testing.assert_array_equal(ds.labels, np.array([float(s) for s in labels]))
    np.testing.assert_array_equal(ds.X[:, 0], expect.astype(np.float32))


float32s = st.floats(width=32, allow_nan=False, allow_infinity=False)


@SETTINGS
@given(st.lists(st.lists(float32s, min_size=3, max_size=3), min_size=1, max_size=12),
       st.lists(st.integers(0, 4), min_size=12, max_size=12), st.booleans())
def test_round_trip_write_read_is_exact(tmp_path, rows, labels, sparse):
    X = np.array(rows, dtype=np.float32)
    n = len(X)
    y = np.array(labels[:n], dtype=np.float64) / 2.0  # half-integers too
    qid = np.repeat(np.arange(n), 1)[:n] // 3 + 10
    docs = np.array([f"doc-{i}" for i in range(n)])
    ds = RankingDataset.from_arrays(sp.csr_matrix(X) if sparse else X, y, qid, doc_ids=docs)
    p = tmp_path / ("r.txt.gz" if sparse else "r.txt")
    write_svmlight(ds, p)
    back = read_svmlight(p, dense=not sparse)  # no n_features: the shape comes back from the file
    Xb = back.X.toarray() if sparse else back.X
    assert back.X.shape == X.shape
    np.testing.assert_array_equal(Xb, X)
    np.testing.assert_array_equal(back.labels, y)
    np.testing.assert_array_equal(back.qid, ds.qid)
    assert back.doc_ids.tolist() == docs.tolist()


@pytest.mark.parametrize("sparse", [True, False])
def test_round_trip_keeps_trailing_zero_columns(tmp_path, sparse):
    """Zeros are not written for CSR (nor with write_zeros=False): an all-zero last column is kept
    by an explicit 'n:0' on the first line, which scikit-learn reads the same way."""
    from sklearn.datasets import load_svmlight_file

    X = np.array([[0.0, 1.5, 0.0, 0.0], [2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]], dtype=np.float32)
    ds = RankingDataset.from_arrays(sp.csr_matrix(X) if sparse else X, [1, 0, 2], [4, 4, 5])
    p = tmp_path / "z.txt"
    write_svmlight(ds, p, write_zeros=False)
    assert p.read_text().splitlines()[1] == "1 qid:4 2:1.5 4:0"  # after the '# rankwise-svmlight' header
    back = read_svmlight(p, dense=not sparse)
    assert back.X.shape == (3, 4)
    np.testing.assert_array_equal(back.X.toarray() if sparse else back.X, X)
    Xs, ys, qs = load_svmlight_file(str(p), query_id=True)
    assert Xs.shape == (3, 4) and qs.tolist() == [4, 4, 5]
    np.testing.assert_array_equal(Xs.toarray(), X)
    if sparse:  # write_zeros=True on CSR writes the stored entries: the empty last column too
        write_svmlight(ds, p, write_zeros=True)
        assert read_svmlight(p, dense=False).X.shape == (3, 4)


def test_round_trip_nan_written_as_null(tmp_path):
    X = np.array([[1.5, np.nan], [np.nan, 0.0]], dtype=np.float32)
    ds = RankingDataset.from_arrays(X, [1, 0], [5, 5])
    p = tmp_path / "n.txt"
    write_svmlight(ds, p)
    assert "2:NULL" in p.read_text()
    back = read_svmlight(p)
    np.testing.assert_array_equal(back.X, X)


def test_letor_features_crlf_gz_docid_null(tmp_path):
    text = ("2 qid:10 1:0.5 2:NULL 3:1 #docid = GX001-00-1 inc = 1 prob = 0.5\r\n"
            "0 qid:10 1:0.25 2:0.1 3:NULL #docid = GX001-00-2 inc = 0 prob = 0.1\r\n")
    p = tmp_path / "letor.txt.gz"
    p.write_bytes(gzip.compress(text.encode()))
    ds = read_svmlight(p)
    assert ds.doc_ids.tolist() == ["GX001-00-1", "GX001-00-2"]
    assert np.isnan(ds.X[0, 1]) and np.isnan(ds.X[1, 2])
    assert ds.X[0, 2] == 1.0 and ds.labels.tolist() == [2.0, 0.0]


def test_query_file_and_zero_based(tmp_path):
    p = tmp_path / "rank.train"
    p.write_text("1 0:0.5 4:1\n0 2:0.1\n3 0:1\n")
    (tmp_path / "rank.train.query").write_text("2\n1\n")
    ds = read_svmlight(p, zero_based=True)
    assert ds.n_queries == 2 and ds.query_offsets.tolist() == [0, 2, 3]
    assert ds.n_features == 5 and ds.X[0, 4] == 1.0
    q = tmp_path / "other.group"
    q.write_text("1\n2\n")
    ds2 = read_svmlight(p, zero_based=True, query_file=q)
    assert ds2.query_offsets.tolist() == [0, 1, 3]


def test_huge_sparse_indices_stay_sparse(tmp_path):
    p = tmp_path / "big.txt"
    p.write_text("1 qid:1 5:1 3000000000:2\n0 qid:1 7:0.5\n")
    ds = read_svmlight(p)
    assert sp.issparse(ds.X) and ds.X.shape == (2, 3000000000)
    assert ds.X[0, 2999999999] == 2.0 and ds.X[1, 6] == 0.5


def test_regrouping_reported(tmp_path):
    p = tmp_path / "r.txt"
    p.write_text("1 qid:1 1:1\n0 qid:2 1:2\n2 qid:1 1:3\n0 qid:2 1:4\n")
    with pytest.warns(UserWarning, match=r"r\.txt: the rows of 2 queries \(the first: 1\) are not contiguous; "
                                         r"2 of 4 rows were regrouped stably"):
        ds = read_svmlight(p)
    assert ds.query_ids.tolist() == [1, 2]
    assert ds.X[:, 0].tolist() == [1, 3, 2, 4]
    assert ds.regrouped_rows == 2 and ds.row_order.tolist() == [0, 2, 1, 3]


def test_binary_cache_hit(tmp_path):
    p = tmp_path / "c.txt"
    p.write_text("1 qid:1 1:1 #docid = a\n0 qid:1 1:2 #docid = b\n")
    first = read_svmlight(p, cache=tmp_path / "cache")
    dirs = list((tmp_path / "cache").iterdir())
    assert len(dirs) == 1 and (dirs[0] / "meta.json").exists()
    # the cache is read (not the file): prove it by making the parser unusable
    import rankwise.data.svmlight as S

    def no_parse(*a, **k):
        raise AssertionError("parsed although the cache holds the file")

    orig, S._parse_bytes = S._parse_bytes, no_parse
    try:
        again = read_svmlight(p, cache=tmp_path / "cache")
    finally:
        S._parse_bytes = orig
    assert again.labels.tolist() == [1.0, 0.0]
    assert again.doc_ids.tolist() == first.doc_ids.tolist()
    # cached labels broken on purpose are refused (digest), with a warning, and the file parsed again
    np.save(dirs[0] / "labels.npy", np.array([7.0, 8.0]))
    with pytest.warns(UserWarning, match=r"cache entry .* was not used: .*labels\.npy does not match the digest"):
        again = read_svmlight(p, cache=tmp_path / "cache")
    assert again.labels.tolist() == [1.0, 0.0]
    # a changed file (size/mtime) is parsed again
    p.write_text("1 qid:1 1:1 #docid = a\n0 qid:1 1:5 #docid = b\n3 qid:2 1:0 #docid = c\n")
    fresh = read_svmlight(p, cache=tmp_path / "cache")
    assert fresh.labels.tolist() == [1.0, 0.0, 3.0]


@pytest.mark.parametrize("explicit", [False, True])
def test_binary_cache_follows_the_group_file(tmp_path, explicit):
    """The cache key covers the group file (given or found next to the data file): editing it
    after a cached read gives a fresh result, not the stale grouping."""
    import os

    p = tmp_path / "g.train"
    p.write_text("1 1:1\n0 1:2\n2 1:3\n")
    q = tmp_path / ("sizes.txt" if explicit else "g.train.query")
    q.write_text("2\n1\n")
    kw = {"query_file": q} if explicit else {}
    first = read_svmlight(p, cache=tmp_path / "cache", **kw)
    assert first.query_offsets.tolist() == [0, 2, 3]
    assert read_svmlight(p, cache=tmp_path / "cache", **kw).query_offsets.tolist() == [0, 2, 3]  # cache hit
    st = q.stat()
    q.write_text("1\n2\n")  # same size: only the content and mtime change
    os.utime(q, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    fresh = read_svmlight(p, cache=tmp_path / "cache", **kw)
    assert fresh.query_offsets.tolist() == [0, 1, 3]


def test_matches_sklearn_on_lightgbm_sample(data_dir):
    from sklearn.datasets import load_svmlight_file

    path = data_dir / "lightgbm_lambdarank" / "rank.train"
    ds = read_svmlight(path)
    X, y = load_svmlight_file(str(path), dtype=np.float32, zero_based=False, n_features=ds.n_features)
    assert sp.issparse(ds.X)
    assert (ds.X != X).nnz == 0
    np.testing.assert_array_equal(ds.labels, y)


def test_fixed_decimal_writer(tmp_path):
    X = np.array([[0.1234567, -2.5, 0.0], [1e-7, 12.0, -0.0000004]], dtype=np.float32)
    ds = RankingDataset.from_arrays(X, [2, 0], [1, 1])
    p = tmp_path / "fx.txt"
    write_svmlight(ds, p, decimals=6)
    lines = p.read_text().splitlines()[1:-1]  # between the '# rankwise-svmlight' header and trailer
    assert lines[0] == "2 qid:1 1:0.123457 2:-2.500000 3:0.000000"
    back = read_svmlight(p)
    np.testing.assert_allclose(back.X, X, atol=5e-7)
