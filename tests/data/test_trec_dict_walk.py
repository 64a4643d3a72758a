"""The compiled walk of ``{qid: {docno: value}}`` dicts (``_trec_kernel.dict_rows``, used by
``Run.from_dict`` and ``Qrels.from_dict``) against the general path it stands in for
(``_Ids.from_keys`` + ``np.fromiter``): the same id buffer, spans, hashes and values, bit for
bit, on ids and values as users pass them; the general path wherever the walk declines; and the
same evaluations and the same refusals end to end.
"""
from __future__ import annotations

from itertools import chain

import numpy as np
import pytest

from rankwise.data import trec as T
from rankwise.data.trec import Qrels, Run, _dict_columns, _Ids
from rankwise.errors import InputError
from rankwise.metrics import evaluate_runs

AWKWARD_IDS = (["", "a", "é", "日本", "a\x00", "a\r", "with space", "tab\there", "🙂" * 3]
               + ["x" * n for n in (1, 7, 8, 9, 15, 16, 17, 40, 300)]
               + [("0123456789abcdef" * 3)[:n] for n in range(1, 41)])

VALUES = [0.0, -0.0, 1.0, 0.1, 1 / 3, -2.5e-300, 5e-324, 1.7976931348623157e308, 3, -7, 2 ** 53 + 1, -(2 ** 62),
          12.345678901234567, 4.9507700123778751e+00, -8.0459999999999994]


def _general(dicts, n):
    """The general path (what ``from_dict`` did before the walk, and does where it declines)."""
    ids = _Ids.from_keys(dicts, n, "document id")
    return ids, np.fromiter(chain.from_iterable(d.values() for d in dicts), dtype=np.float64, count=n)


def _dicts(ids, values, sizes):
    out, k = [], 0
    for size in sizes:
        out.append({ids[(k + j) % len(ids)] + ("" if (k + j) < len(ids) else f"#{k + j}"): values[(k + j) % len(values)]
                    for j in range(size)})
        k += size
    return out


@pytest.mark.parametrize("sizes", [[1], [0, 3, 0], [len(AWKWARD_IDS)], [5, 0, 40, 1, 200, 7], [0, 0, 1]])
def test_the_walk_equals_the_general_path_bit_for_bit(sizes):
    dicts = _dicts(AWKWARD_IDS, VALUES, sizes)
    n = sum(len(d) for d in dicts)
    ids, values = _dict_columns(dicts, n)
    ref_ids, ref_values = _general(dicts, n)
    assert ids.buf.tobytes() == ref_ids.buf.tobytes()
    assert ids.s.tolist() == ref_ids.s.tolist() and ids.e.tolist() == ref_ids.e.tolist()
    assert ids.h.tolist() == ref_ids.h.tolist()
    assert values.view(np.uint64).tolist() == ref_values.view(np.uint64).tolist()  # -0.0 and rounding included
    assert ids.all_str and ids.strings() == ref_ids.strings() == [k for d in dicts for k in d]


def test_the_walk_grows_its_buffer_for_long_ids():
    dicts = [{f"{'long-id-' * 40}{i}": float(i) for i in range(500)}]  # ~330 bytes an id, 16 reserved per id
    ids, values = _dict_columns(dicts, 500)
    ref_ids, ref_values = _general(dicts, 500)
    assert ids.buf.tobytes() == ref_ids.buf.tobytes() and ids.h.tolist() == ref_ids.h.tolist()
    assert values.tolist() == ref_values.tolist()


class _OwnFloat(float):
    def __float__(self):
        return 99.0


def test_numpy_float64_scores_are_walked_and_other_float_subclasses_are_not():
    scores = np.random.default_rng(3).normal(size=50) * 1e-7
    dicts = [dict(zip([f"d{i}" for i in range(50)], scores))]  # numpy.float64 values, as a model's scores give
    ids, values = _dict_columns(dicts, 50)
    assert values.view(np.uint64).tolist() == _general(dicts, 50)[1].view(np.uint64).tolist()
    run = Run.from_dict({"q": {"a": _OwnFloat(0.5), "b": 1.0}})  # the general path: numpy's conversion
    assert run.scores.tolist() == [99.0, 1.0]


@pytest.mark.parametrize("dicts, n", [
    ([{1: 1.0}], 1),  # a key that is not a str
    ([{"a\nb": 1.0}], 1),  # a line break in a key
    ([{"ok": 1.0, "a\ud800": 1.0}], 2),  # not encodable as UTF-8
    ([{"a": True}], 1),  # bool (an int subclass), numpy scalars, strings, None: np.fromiter's rules
    ([{"a": np.float32(0.5)}], 1),
    ([{"a": _OwnFloat(0.5)}], 1),  # a float subclass of its own: numpy converts it by its __float__
    ([{"a": "0.5"}], 1),
    ([{"a": None}], 1),
    ([{"a": 2 ** 64}], 1),  # beyond 64 bits
    ([{"a": 1.0}], 2),  # fewer items than counted
    ([{"a": 1.0, "b": 2.0}], 1),  # more
    ([], 0),
])
def test_the_walk_declines_what_it_does_not_read(dicts, n):
    assert _dict_columns(dicts, n) is None


def test_a_line_break_anywhere_in_any_key_is_seen():
    # the walk tests the copied bytes a word at a time: every position of the break in every
    # length around the 8-byte words, as the only key or after others
    for length in range(1, 26):
        for at in range(length):
            key = "".join("\n" if i == at else "abcdefghijklmnopqrstuvwxyz"[i] for i in range(length))
            assert _dict_columns([{key: 1.0}], 1) is None
            assert _dict_columns([{"x" * (length % 9): 1.0}, {"y": 2.0, key: 1.0}], 3) is None
        key = "abcdefghijklmnopqrstuvwxyz"[:length]
        assert _dict_columns([{"z": 0.5}, {key: 1.0}], 2) is not None  # and none where there is none


def _run_dict(rng, n_topics=6, n_docs=60):
    run = {}
    for t in range(n_topics):
        scores = rng.normal(size=n_docs)
        if t % 2 == 0:
            scores = np.round(scores, 1)  # ties, broken by docno
        run[f"{401 + t}"] = {f"DOC-{rng.integers(10 ** 6):07d}{'é' if j % 7 == 0 else ''}": (
            float(s) if j % 5 else int(round(s * 3))) for j, s in enumerate(scores.tolist())}
    run["empty-topic"] = {}
    return run


def test_evaluations_equal_with_the_walk_and_with_the_general_path(monkeypatch):
    rng = np.random.default_rng(7)
    run = _run_dict(rng)
    qrels = {q: {d: int(rng.integers(-1, 3)) for d in list(docs)[::2]} for q, docs in run.items() if docs}
    walked = evaluate_runs(qrels, {"r": run}, "all_trec")["r"]
    monkeypatch.setattr(T, "_dict_columns", lambda dicts, n: None)
    general = evaluate_runs(qrels, {"r": run}, "all_trec")["r"]
    assert walked.mean == general.mean
    assert walked.per_query.equals(general.per_query)
    assert walked.strings["relstring"].tolist() == general.strings["relstring"].tolist()


@pytest.mark.parametrize("run, message", [
    ({"1": {"a\nb": 1.0, "c": 0.5}}, "line break"),
    ({"1": {"a": float("nan")}}, "must be finite"),
    ({"1": {"a": float("inf"), "b": 1.0}}, "must be finite"),
    ({"1": {"a": None}}, "must be finite"),
    ({"1": {"a": "high"}}, "must be numbers"),
    ({"1": {"a\ud800": 1.0}}, "valid Unicode"),
])
def test_refusals_are_the_general_paths(run, message):
    with pytest.raises(InputError, match=message):
        Run.from_dict(run)


def test_qrels_from_dict_walks_and_checks_grades():
    q = Qrels.from_dict({"1": {"a": 2, "b": 0, "c": -1}, "2": {"é": 1.0}})
    assert q.rel.tolist() == [2, 0, -1, 1] and q.docs.strings() == ["a", "b", "c", "é"]
    for bad in (0.5, float("nan"), 10 ** 7):
        with pytest.raises(InputError, match="grades must be integers"):
            Qrels.from_dict({"1": {"a": bad}})
