"""RankingDataset: construction, regrouping, iteration, subset/take/concat, padding, binary save/load."""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reference.data_reference import padded_naive  # noqa: E402

from rankwise.data import RankingDataset, concat  # noqa: E402
from rankwise.errors import InputError  # noqa: E402


def small(sparse=False):
    X = np.arange(12, dtype=np.float32).reshape(6, 2)
    y = np.array([1, 0, 2, 0, 1, 3], dtype=float)
    qid = np.array([7, 7, 3, 3, 3, 9])
    docs = [f"d{i}" for i in range(6)]
    return RankingDataset.from_arrays(sp.csr_matrix(X) if sparse else X, y, qid, doc_ids=docs,
                                      feature_names=["a", "b"])


def test_attributes_and_dtypes():
    ds = small()
    assert len(ds) == 6 and ds.n_queries == 3 and ds.n_features == 2
    assert ds.X.dtype == np.float32 and ds.labels.dtype == np.float64
    assert ds.query_offsets.dtype == np.int64 and ds.query_offsets.tolist() == [0, 2, 5, 6]
    assert ds.query_ids.tolist() == [7, 3, 9] and ds.qid.tolist() == [7, 7, 3, 3, 3, 9]
    assert ds.regrouped_rows == 0 and ds.row_order is None
    assert ds.feature_names == ["a", "b"]


def test_sparse_never_densified():
    ds = small(sparse=True)
    assert sp.issparse(ds.X) and ds.X.format == "csr" and ds.X.dtype == np.float32
    assert sp.issparse(ds.subset([3]).X)
    assert sp.issparse(concat([ds.subset([3]), small().subset([7])]).X)
    with pytest.raises(InputError, match="values is sparse"):
        ds.padded(ds.X)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=30))
def test_regroup_is_stable_and_counted(qids):
    q = np.array(qids)
    X = np.arange(len(q), dtype=np.float32)[:, None]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = RankingDataset.from_arrays(X, np.zeros(len(q)), q)
    # a warning exactly when rows moved, with the count and the first query found split
    assert len(caught) == (ds.regrouped_rows > 0)
    if caught:
        runs = [v for k, v in enumerate(qids) if k == 0 or qids[k - 1] != v]
        first = next(v for k, v in enumerate(runs) if v in runs[:k])
        msg = str(caught[0].message)
        assert caught[0].category is UserWarning
        assert f"{ds.regrouped_rows} of {len(q)} rows were regrouped stably" in msg
        assert f"query {first}" in msg or f"the first: {first})" in msg
    # naive: queries in order of first appearance, rows in input order
    order = []
    for u in dict.fromkeys(qids):
        order += [i for i, v in enumerate(qids) if v == u]
    assert ds.X[:, 0].astype(int).tolist() == order
    assert ds.query_ids.tolist() == list(dict.fromkeys(qids))
    assert ds.regrouped_rows == sum(1 for k, i in enumerate(order) if k != i)
    for query in ds:
        assert set(query.X[:, 0].astype(int)) == {i for i, v in enumerate(qids) if v == query.qid}


def test_strict_rejects_with_query_and_rows():
    with pytest.raises(InputError, match=r"rows of query 1 are not contiguous \(rows \(1-based\) 1-1, 3-3\)"):
        RankingDataset.from_arrays(np.zeros((3, 1)), [0, 0, 0], [1, 2, 1], strict=True)


def test_iteration_yields_views():
    ds = small()
    qs = list(ds)
    assert [q.qid for q in qs] == [7, 3, 9]
    assert qs[1].labels.tolist() == [2, 0, 1] and qs[1].doc_ids.tolist() == ["d2", "d3", "d4"]
    assert (qs[1].start, qs[1].stop) == (2, 5)
    assert np.shares_memory(qs[1].X, ds.X)


def test_subset_take_keep_given_order():
    ds = small()
    s = ds.subset([9, 7])
    assert s.query_ids.tolist() == [9, 7] and s.labels.tolist() == [3, 1, 0]
    assert s.doc_ids.tolist() == ["d5", "d0", "d1"] and s.query_offsets.tolist() == [0, 1, 3]
    t = ds.take([2, 0])
    np.testing.assert_array_equal(t.X, s.X)
    with pytest.raises(InputError, match="query id 42 is not in this data set"):
        ds.subset([42])
    with pytest.raises(InputError, match=r"query id 'abc' is not in this data set \(it has 3 int query ids"):
        ds.subset(["abc"])
    with pytest.raises(InputError, match=r"query ids \['abc', 42\] \(2\) are not in this data set"):
        ds.subset([9, "abc", 42])
    assert ds.subset(["9"]).query_ids.tolist() == [9]  # the same id spelled as a string
    with pytest.raises(InputError, match="more than once"):
        ds.take([0, 0])


def test_concat_and_duplicate_qids():
    ds = small()
    c = RankingDataset.concat([ds.subset([3]), ds.subset([7, 9])])
    assert c.query_ids.tolist() == [3, 7, 9] and len(c) == 6
    assert c.doc_ids.tolist() == ["d2", "d3", "d4", "d0", "d1", "d5"]
    with pytest.raises(InputError, match="query id 3 occurs in more than one data set"):
        concat([ds, ds.subset([3])])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=25))
def test_padded_and_buckets_match_naive(sizes):
    n = sum(sizes)
    rng = np.random.default_rng(len(sizes))
    y = rng.integers(0, 5, n).astype(float)
    ds = RankingDataset(np.zeros((n, 1)), y, np.concatenate(([0], np.cumsum(sizes))))
    ref, ref_where = padded_naive(y, ds.query_offsets, pad_value=-1.0)
    pb = ds.padded(pad_value=-1.0)
    np.testing.assert_array_equal(pb.values, ref)
    np.testing.assert_array_equal(pb.where, ref_where)
    batches = ds.padded(bucket=True, pad_value=-1.0)
    seen = []
    for b in batches:
        w = b.values.shape[1]
        for r, qi in enumerate(b.query_index):
            k = sizes[qi]
            assert w >= k and w < 2 * k  # power-of-two buckets: at most half padding
            np.testing.assert_array_equal(b.values[r, :k], ref[qi, :k])
            assert b.where[r].sum() == k and np.all(b.values[r, k:] == -1.0)
            np.testing.assert_array_equal(b.index[r, :k], ds.query_offsets[qi] + np.arange(k))
            seen.append(int(qi))
    assert sorted(seen) == list(range(len(sizes)))


def test_padded_features_three_d():
    ds = small()
    pb = ds.padded(ds.X)
    assert pb.values.shape == (3, 3, 2)
    np.testing.assert_array_equal(pb.values[1], ds.X[2:5])
    assert np.all(pb.values[2, 1:] == 0)


def test_save_load_dense_and_sparse(tmp_path):
    for sparse in (False, True):
        ds = small(sparse)
        ds.save(tmp_path / str(sparse))
        back = RankingDataset.load(tmp_path / str(sparse))
        Xa = ds.X.toarray() if sparse else ds.X
        Xb = back.X.toarray() if sparse else back.X
        np.testing.assert_array_equal(Xa, Xb)
        assert back.query_ids.tolist() == ds.query_ids.tolist()
        assert back.doc_ids.tolist() == ds.doc_ids.tolist() and back.feature_names == ["a", "b"]
    mm = RankingDataset.load(tmp_path / "False", mmap_mode="r")
    assert isinstance(mm.X, np.memmap)
    # no pickle anywhere: object arrays cannot be saved/loaded
    assert all(np.load(f, allow_pickle=False) is not None for f in (tmp_path / "True").glob("*.npy"))


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(X=np.zeros((2, 1)), labels=[0, np.nan], qid=[1, 1]), "labels contains NaN"),
    (dict(X=np.zeros((2, 1)), labels=[0], qid=[1, 1]), "labels has 1 entries but X has 2 rows"),
    (dict(X=np.zeros((2, 1)), labels=[0, 1], qid=[1]), r"qid has shape \(1,\) but X has 2 rows"),
    (dict(X=np.zeros(3), labels=[0, 1, 1], qid=[1, 1, 1]), "X must be 2-d"),
    (dict(X=np.zeros((0, 2)), labels=[], qid=[]), "X has no rows"),
    (dict(X=[["a", "b"]], labels=[0], qid=[1]), "X must be a numeric"),
    (dict(X=np.array([[0.5, np.nan], [1.0, np.inf]]), labels=[0, 1], qid=[1, 1]),
     r"X contains inf \(first at row 1, column 1: inf\); features must be finite, with NaN for a missing value"),
    (dict(X=sp.csr_matrix(np.array([[0.0, -np.inf], [1.0, 0.0]])), labels=[0, 1], qid=[1, 1]),
     r"X contains inf \(first at row 0, column 1: -inf\)"),
    (dict(X=np.zeros((3, 1)), labels=[0, 1, 0], qid=np.array([1, None, 1], dtype=object)),
     r"qid is missing at row 1 \(got None\)"),
    (dict(X=np.zeros((2, 1)), labels=[0, 1], qid=np.array(["a", np.nan], dtype=object)), "qid is missing at row 1"),
    (dict(X=np.zeros((3, 1)), labels=[0, 1, 0], qid=[1, "1", 1]),
     r"qid mixes strings and numbers \(e.g. 1 at row 0 and '1' at row 1\)"),
    (dict(X=np.zeros((2, 1)), labels=[0, 1], qid=np.array([2, "x"], dtype=object)), "qid mixes strings and numbers"),
])
def test_from_arrays_bad_input(kwargs, pattern):
    with pytest.raises(InputError, match=pattern):
        RankingDataset.from_arrays(kwargs["X"], kwargs["labels"], kwargs["qid"])


def test_constructor_bad_offsets():
    with pytest.raises(InputError, match="must start at 0 and end at n_rows=3"):
        RankingDataset(np.zeros((3, 1)), [0, 0, 0], [0, 2])
    with pytest.raises(InputError, match="query 1 has 0 rows"):
        RankingDataset(np.zeros((3, 1)), [0, 0, 0], [0, 2, 2, 3])
    with pytest.raises(InputError, match="query_ids must be distinct"):
        RankingDataset(np.zeros((3, 1)), [0, 0, 0], [0, 2, 3], [5, 5])


def test_nan_features_stay_missing_values():
    X = np.array([[np.nan, 1.0], [0.5, np.nan]], dtype=np.float32)
    ds = RankingDataset.from_arrays(X, [1, 0], [3, 3])
    np.testing.assert_array_equal(ds.X, X)
    with pytest.raises(InputError, match="X contains inf"):
        RankingDataset(np.array([[np.inf]]), [0.0], [0, 1])


def test_object_qids_of_one_kind_are_kept():
    ints = RankingDataset.from_arrays(np.zeros((3, 1)), [0, 1, 0], np.array([5, 5, 2], dtype=object))
    assert ints.query_ids.dtype.kind == "i" and ints.query_ids.tolist() == [5, 2]
    strs = RankingDataset.from_arrays(np.zeros((3, 1)), [0, 1, 0], np.array(["5", "5", "2"], dtype=object))
    assert strs.query_ids.tolist() == ["5", "2"]
    with pytest.raises(InputError, match="query_ids mixes strings and numbers"):
        RankingDataset(np.zeros((2, 1)), [0, 1], [0, 1, 2], query_ids=[1, "1"])


def test_contiguous_input_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        small()


def test_a_damaged_saved_dataset_is_a_clear_error(tmp_path):
    """A cache folder damaged on disk: an InputError naming the folder, never a KeyError or a numpy error."""
    import json

    import pytest as _pytest

    from rankwise.data import RankingDataset as _DS
    from rankwise.errors import InputError as _IE

    ds = _DS.from_arrays(np.ones((4, 2), dtype=np.float32), [0.0, 1.0, 2.0, 0.0], [1, 1, 2, 2])
    ds.save(tmp_path / "c")
    meta = json.loads((tmp_path / "c" / "meta.json").read_text())
    cases = {
        "no_key": lambda d: (d / "meta.json").write_text(json.dumps({k: v for k, v in meta.items() if k != "sparse"})),
        "list": lambda d: (d / "meta.json").write_text("[1, 2]"),
        "garbage_array": lambda d: (d / "labels.npy").write_bytes(b"\x93NUMPY garbage"),
        "missing_array": lambda d: (d / "query_ids.npy").unlink(),
        "offsets_backwards": lambda d: np.save(d / "query_offsets.npy", np.array([0, 3, 2, 4])),
        "nan_labels": lambda d: np.save(d / "labels.npy", np.array([0.0, np.nan, 1.0, 0.0])),
        "bad_utf8": lambda d: (d / "meta.json").write_bytes(b"\xff\xfe{"),
    }
    import shutil

    for name, damage in cases.items():
        d = tmp_path / name
        shutil.copytree(tmp_path / "c", d)
        damage(d)
        with _pytest.raises(_IE, match=str(d)):
            _DS.load(d)
