"""The TREC reader's id hash (8 bytes at a time) and the qrels join tables built on it.

The hash only picks candidates: these tests force collisions and near-equal ids (equal in their
first 16 bytes, equal but for zero bytes, every length across the 8-byte word boundaries) and
check that a run document joins a judgment exactly when the bytes are equal.
"""
from __future__ import annotations

import numpy as np
import pytest

from rankwise.data import _trec_kernel as DK
from rankwise.data.trec import Qrels, Run


def _buf(words, prefix=b""):
    return np.frombuffer(prefix + "\n".join(words).encode("utf-8"), dtype=np.uint8)


def _ids(words):
    buf = _buf(words)
    s, e, h = DK.split_hash(buf)
    return buf, s, e, h


def _reference_spans(words, offset=0):
    """Spans of the items of ``"\\n".join(words)`` (bytes), computed in Python."""
    spans, pos = [], offset
    for w in words:
        n = len(w.encode("utf-8"))
        spans.append((pos, pos + n))
        pos += n + 1
    return spans


IDS = (["", "a", "é", "日本", "a\x00", "a\x00\x00"] + ["x" * n for n in range(1, 41)]
       + [("0123456789abcdef" * 3)[:n] for n in range(1, 41)] + ["ü" * n for n in range(1, 21)])


@pytest.mark.parametrize("shift", range(9))
def test_split_hash_spans_and_hashes_equal_the_span_hash_at_every_alignment(shift):
    # a prefix item of ``shift`` bytes moves every id across the 8-byte word boundaries
    words = ["p" * shift] + IDS
    buf = _buf(words)
    s, e, h = DK.split_hash(buf)
    assert list(zip(s.tolist(), e.tolist())) == _reference_spans(words)
    assert h.tolist() == DK.hashes(buf, s, e).tolist()
    # equal ids, equal hashes; the different ids here all hash apart
    by_id = {}
    for w, x in zip(words, h.tolist()):
        by_id.setdefault(w, set()).add(x)
    assert all(len(v) == 1 for v in by_id.values())
    assert len({next(iter(v)) for v in by_id.values()}) == len(by_id)


def test_split_hash_at_the_buffer_end_and_on_empty_items():
    for words in (["abc"], ["abcdefgh"], ["abcdefghi"], ["", ""], ["a", ""], ["x" * 16, "y" * 24], [""]):
        buf = _buf(words)
        s, e, h = DK.split_hash(buf)
        assert list(zip(s.tolist(), e.tolist())) == _reference_spans(words)
        assert h.tolist() == DK.hashes(buf, s, e).tolist()
    # an id's hash does not depend on where it lies in a buffer
    one = DK.split_hash(_buf(["needle-0123456789"]))[2][0]
    other = DK.split_hash(_buf(["hay", "needle-0123456789", "stack"]))[2][1]
    assert one == other


def test_file_and_dict_paths_hash_ids_alike(tmp_path):
    docs = [d for d in IDS if d and "\x00" not in d]
    text = "".join(f"q{i % 3} 0 {d} {i % 3}\n" for i, d in enumerate(docs))
    path = tmp_path / "q.txt"
    path.write_text(text, encoding="utf-8")
    from_file = Qrels.read(path)
    from_dict = Qrels.from_dict(from_file.to_dict())
    f = dict(zip(from_file.docs.strings(), from_file.docs.h.tolist()))
    d = dict(zip(from_dict.docs.strings(), from_dict.docs.h.tolist()))
    assert f == d and len(f) == len(docs)


def _join(j_words, j_off, j_rel, r_words, r_off, qmap, forced_hash=None):
    jb, js, je, jh = _ids(j_words)
    rb, rs, re_, rh = _ids(r_words)
    if forced_hash is not None:  # every id of both sides with one hash: only the bytes decide
        jh = np.full_like(jh, forced_hash)
        rh = np.full_like(rh, forced_hash)
    t_off, table = DK.join_table(np.asarray(j_off), jh, jb, js, je, np.asarray(j_rel, dtype=np.int64))
    b_off, bits = DK.join_filter(np.asarray(j_off), jh)
    if forced_hash is not None:
        assert np.count_nonzero(bits) <= len(j_off) - 1  # one bit per topic at most: the filter passes all
    return DK.join(np.asarray(r_off), rh, rb, rs, re_, np.asarray(qmap), np.asarray(j_off), t_off, table, b_off, bits,
                   jb, js, -9, -8).tolist()


@pytest.mark.parametrize("forced", [None, 12345])
def test_join_matches_equal_bytes_only_across_word_boundaries(forced):
    base = "0123456789abcdefXYZ0123456789abcdefXYZ01"  # 40 bytes
    # judged: every prefix length 1..40 of ``base`` (grade = length)
    j_words = [base[:n] for n in range(1, 41)]
    j_rel = list(range(1, 41))
    # run: the same ids in another order, ids equal in the first 16 bytes but not after, ids that
    # differ only by trailing zero bytes, non-ASCII ids of the same byte length
    r_words = [base[:n] for n in range(40, 0, -1)]
    r_words += [base[:16] + "#" + base[17:n] for n in range(17, 41)]
    r_words += [base[:n - 1] + "\x00" for n in range(1, 9)] + [base[:3] + "\x00" * k for k in range(1, 6)]
    r_words += ["é" * 4, base[:7] + "é"]
    want = list(range(40, 0, -1)) + [-9] * 24 + [-9] * 8 + [-9] * 5 + [-9, -9]
    got = _join(j_words, [0, 40], j_rel, r_words, [0, len(r_words)], [0], forced)
    assert got == want


@pytest.mark.parametrize("forced", [None, 7])
def test_join_topics_empty_or_on_one_side_only(forced):
    # qrels topics: 0 holds a, b; 1 holds nothing; 2 holds a (graded -1: in the pool, not judged)
    j_words = ["a", "b", "a"]
    j_off = [0, 2, 2, 3]
    j_rel = [2, 0, -1]
    # run topics: 0 -> qrels 0; 1 -> qrels 1 (no judgments); 2 -> no qrels topic; 3 -> qrels 2; 4 empty
    r_words = ["b", "a", "c", "a", "a", "a"]
    r_off = [0, 3, 4, 5, 6, 6]
    qmap = [0, 1, -1, 2, 0]
    assert _join(j_words, j_off, j_rel, r_words, r_off, qmap, forced) == [0, 2, -9, -9, -9, -8]


def test_evaluate_runs_dict_and_file_paths_agree_on_awkward_ids(tmp_path):
    from rankwise.metrics import evaluate_runs

    docs = [d for d in IDS if d and "\x00" not in d]
    qrels = {"1": {d: (i % 3) for i, d in enumerate(docs[::2])}, "2": {docs[1]: 1}, "3": {}}
    run = {"1": {d: float(len(docs) - i) for i, d in enumerate(docs)}, "2": {docs[1]: 1.0, docs[3]: 2.0},
           "4": {docs[0]: 1.0}}
    qp, rp = tmp_path / "q.txt", tmp_path / "r.txt"
    qp.write_text("".join(f"{q} 0 {d} {r}\n" for q, ds in qrels.items() for d, r in ds.items()), encoding="utf-8")
    rp.write_text("".join(f"{q} Q0 {d} 1 {s!r} t\n" for q, ds in run.items() for d, s in ds.items()),
                  encoding="utf-8")
    a = evaluate_runs(qrels, {"r": run}, "all_trec")["r"]
    b = evaluate_runs(str(qp), {"r": Run.read(rp)}, "all_trec")["r"]
    assert a.per_query.equals(b.per_query)
    assert a.mean == b.mean
    assert a.per_query.loc["1", "num_rel_ret"] == sum(1 for i, d in enumerate(docs[::2]) if i % 3 >= 1)


def test_join_filter_sets_one_bit_per_judgment_and_never_hides_a_judged_document():
    rng = np.random.default_rng(0)
    j_words = [f"doc-{i:07d}" for i in rng.choice(10**6, size=3000, replace=False)]
    j_off = np.array([0, 1000, 1000, 3000], dtype=np.int64)  # the middle topic has no judgments
    jb, js, je, jh = _ids(j_words)
    b_off, bits = DK.join_filter(j_off, jh)
    sizes = np.diff(b_off) * 64
    assert sizes.tolist() == [16384, 64, 32768]  # >= 16 bits per judgment, a power of two
    # every judged document passes its own topic's filter, and joins
    got = _join(j_words, j_off, list(range(3000)), j_words, [0, 1000, 1000, 3000], [0, 1, 2])
    assert got == list(range(3000))
    # unjudged documents: joined to nothing, the filter turning most of them away
    others = [f"other-{i}" for i in range(2000)]
    assert _join(j_words, j_off, list(range(3000)), others, [0, 1000, 1000, 2000], [0, 1, 2]) == [-9] * 2000
    ob, os_, oe, oh = _ids(others)
    y = (oh[:1000] >> np.uint64(40)) & np.uint64(16384 - 1)
    passed = (bits[(y >> np.uint64(6)).astype(np.int64)] >> (y & np.uint64(63))) & np.uint64(1)
    assert passed.mean() < 0.15


def test_split_hash_with_the_expected_count_reports_more_or_fewer_items():
    buf = _buf(["a", "bb", "ccc"])
    whole = DK.split_hash(buf)
    for n in (1, 2, 3, 4, 7):
        s, e, h = DK.split_hash(buf, n)
        k = min(n, 3)
        assert len(s) == k and s.tolist() == whole[0][:k].tolist() and h.tolist() == whole[2][:k].tolist()
        assert (e[-1] == len(buf)) == (n >= 3)
    # a key holding a line break is caught by the dict path
    from rankwise.errors import InputError

    with pytest.raises(InputError, match="line break"):
        Run.from_dict({"1": {"a\nb": 1.0, "c": 0.5}})
    with pytest.raises(InputError, match="line break"):
        Qrels.from_dict({"1": {"a": 1, "b\n": 0}})
