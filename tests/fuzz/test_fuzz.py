"""Hypothesis fuzzing of every reader, the arrays API and model loading (issue 17).

Every generated input must give a valid result (checked against a reference where one exists)
or a ``RankwiseError``: never another exception, never NaN/inf, never a silent accept of the
invalid classes issue 17 lists. The ``fuzz`` profile is derandomized (the same examples on every
run) with a few hundred examples per target; ``benchmarks/fuzz.py`` runs the 100,000-case version.
Model loading runs in a worker process, so a crash is a failed test, not a dead test run.
"""
from __future__ import annotations

import os
import random
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import targets as T  # noqa: E402

settings.register_profile("fuzz", derandomize=True, deadline=None, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.filter_too_much])
FUZZ = settings.get_profile("fuzz")


def fuzz(n):
    return settings(FUZZ, max_examples=n)


def check(result):
    outcome, detail = result
    assert outcome in ("ok", "rankwise_error"), f"{outcome}: {detail}"


# ------------------------------------------------------------------------- text files
NUMBERS = ["0", "1", "2", "-1", "+3", "0.5", ".5", "1.", "1e3", "-0", "1023", "1024", "-1023.5", "1e30",
           "1000000000000000000000000000000", "nan", "NaN", "inf", "-inf", "1e400", "3.4e38", "3.5e38",
           "١", "１", "1_0", "²", "0x1A", "1,5", "", "--1", "1e", ".", "NULL", "1.5e-45", "99999999999999999999"]
QIDS = ["1", "2", "7", "0", "-3", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
        "99999999999999999999", "1_0", "٣", "1.5", "", "x"]
INDICES = ["1", "2", "3", "5", "0", "9223372036854775807", "9223372036854775808", "١", "1_0", "-1", ""]
SEPS = [" ", "\t", "  ", " \x0b", "\xa0"]
ENDS = ["\n", "\n", "\n", "\r\n", "\r", ""]
COMMENTS = ["", " #docid = a", " #docid = b1", " # plain", " #docid=", " #docid = x\x00y", " #docid = \ufeffz",
            " #docid = é", "#", " #docid = c\x1b"]


@st.composite
def letor_text(draw):
    lines = []
    end = draw(st.sampled_from(ENDS[:4]))
    for _ in range(draw(st.integers(1, 6))):
        toks = [draw(st.sampled_from(NUMBERS[:13]) if draw(st.booleans()) else st.sampled_from(NUMBERS))]
        if draw(st.integers(0, 9)) > 0:
            toks.append("qid:" + draw(st.sampled_from(QIDS[:3]) if draw(st.booleans()) else st.sampled_from(QIDS)))
        idx = sorted(set(draw(st.lists(st.sampled_from(INDICES[:4]), max_size=4))), key=int)
        if draw(st.integers(0, 4)) == 0:
            idx.append(draw(st.sampled_from(INDICES)))
        for i in idx:
            toks.append(f"{i}:{draw(st.sampled_from(NUMBERS[:8]) if draw(st.booleans()) else st.sampled_from(NUMBERS))}")
        sep = draw(st.sampled_from(SEPS[:2]) if draw(st.integers(0, 5)) else st.sampled_from(SEPS))
        line = sep.join(toks) + draw(st.sampled_from(COMMENTS))
        lines.append(line + (end if draw(st.integers(0, 7)) else draw(st.sampled_from(ENDS))))
    text = "".join(lines).encode("utf-8")
    if draw(st.integers(0, 15)) == 0:
        text = draw(st.sampled_from([b"\xef\xbb\xbf", b"\xff\xfe", b"\x00"])) + text
    return text


@st.composite
def mutated(draw, seed: bytes):
    """A valid file damaged: bytes inserted, replaced or deleted from a hostile alphabet."""
    b = bytearray(seed)
    alphabet = [b"\r", b"\n", b"\x00", b"#", b":", b" ", b"_", b"\xef\xbb\xbf", "١".encode(), "１".encode(),
                "²".encode(), b"9", b"0", b"-", b".", b"e", b"\xff", b"qid:", b"9223372036854775808"]
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(b)))
        op = draw(st.integers(0, 2))
        if op == 0:
            b[pos:pos] = draw(st.sampled_from(alphabet))
        elif op == 1 and pos < len(b):
            b[pos:pos + 1] = draw(st.sampled_from(alphabet))
        elif pos < len(b):
            del b[pos:pos + draw(st.integers(1, 8))]
    return bytes(b)


LETOR_SEED = (b"2 qid:10 1:0.5 2:1.25 3:-3e2 #docid = GX001\n0 qid:10 1:0.1 3:7 #docid = GX002\n"
              b"1 qid:11 2:NULL 3:0 #docid = GX003\n")


@fuzz(300)
@given(letor_text())
def test_svmlight_generated(data):
    check(T.svmlight(data))


@fuzz(300)
@given(mutated(LETOR_SEED))
def test_svmlight_mutated(data):
    check(T.svmlight(data))


@fuzz(300)
@given(st.one_of(
    st.lists(st.sampled_from(["1", "2", "10", "0", "-1", "100000000000000000000", "9007199254740993", "²", "٣", "1_0",
                              " 3 ", "\t4", "x", "", "1.0"]), min_size=1, max_size=5).map(
        lambda xs: "\n".join(xs).encode("utf-8")),
    mutated(b"3\n2\n5\n")))
def test_group_files(data):
    check(T.group_file(data))


QRELS_SEED = b"301 0 FBIS3-10082 1\n301 0 FBIS3-10169 0\n302 0 LA010189-0001 2\n"
RUN_SEED = b"301 Q0 FBIS3-10082 1 12.5 tag\n301 Q0 FBIS3-10169 2 11.25 tag\n302 Q0 LA010189-0001 1 -3 tag\n"


@fuzz(250)
@given(mutated(QRELS_SEED))
def test_trec_qrels(data):
    check(T.trec_qrels(data))


@fuzz(250)
@given(mutated(RUN_SEED))
def test_trec_run(data):
    check(T.trec_run(data))


RATING_FIELDS = ["1", "2", "3", "0", "-1", "6", "99", "2000000", "999999999", "1000000000", "x", "", "1.5"]


@fuzz(150)
@given(st.sampled_from(["u1.base", "u1.test", "u.item"]), st.data())
def test_movielens(which, data):
    seed = {"u1.base": T.BASE, "u1.test": T.TEST, "u.item": T.ITEMS}[which]
    if which != "u.item" and data.draw(st.booleans()):
        rows = data.draw(st.lists(st.tuples(*[st.sampled_from(RATING_FIELDS)] * 3), min_size=1, max_size=4))
        blob = seed + "".join(f"{u}\t{i}\t{r}\t881250960\n" for u, i, r in rows).encode()
    else:
        blob = data.draw(mutated(seed))
    check(T.movielens({which: blob}))


@fuzz(150)
@given(st.data())
def test_events(data):
    n = data.draw(st.integers(1, 8))
    pool = st.sampled_from([1, 2, 3, "a", "b", None, float("nan"), 10**20, -1, 2.5])
    users = data.draw(st.lists(pool, min_size=n, max_size=n))
    items = data.draw(st.lists(pool, min_size=n, max_size=n))
    outcomes = data.draw(st.lists(st.sampled_from([0, 1, True, False, "success", "fail", "yes", None, float("nan"),
                                                   0.5, 2, "1"]), min_size=n, max_size=n))
    feats = data.draw(st.lists(st.sampled_from([0.0, 1.5, float("nan"), float("inf"), -float("inf"), 1e308, 1e39]),
                               min_size=n, max_size=n))
    rule = data.draw(st.sampled_from(["any", "last", "majority"]))
    check(T.events((users, items, outcomes, feats, rule)))


# ------------------------------------------------------------------------- arrays API
EXTREME = [0.0, 1.0, -1.0, 0.5, 2.0, 3.0, 1e308, -1e308, 1e-308, 5e-324, 1e38, 65504.0, 1e5, float("nan"), float("inf"),
           -float("inf")]
DTYPES = ["float64", "float32", "float16", "int64", "object-str", "bool"]


@st.composite
def flat_arrays(draw, with_nonfinite=True):
    n = draw(st.integers(0, 12))
    pool = EXTREME if with_nonfinite else EXTREME[:13]
    scores = draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n))
    labels = draw(st.lists(st.sampled_from(pool[:10] + [4.0, 1.0, 0.0]), min_size=n, max_size=n))
    qid = sorted(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    if draw(st.integers(0, 9)) == 0 and n:
        qid = qid[:-1]  # a length mismatch
    def cast(xs, dt):
        if dt == "object-str":
            return np.array([str(x) for x in xs], dtype=object)
        with np.errstate(all="ignore"):
            return np.array(xs, dtype=np.float64).astype(dt) if dt != "bool" else np.array(xs, dtype=bool)
    s_dt = draw(st.sampled_from(DTYPES[:3]) if draw(st.integers(0, 5)) else st.sampled_from(DTYPES))
    l_dt = draw(st.sampled_from(DTYPES[:3]) if draw(st.integers(0, 5)) else st.sampled_from(DTYPES))
    return cast(scores, s_dt), cast(labels, l_dt), np.array(qid, dtype=np.int64)


@fuzz(200)
@given(flat_arrays(), st.lists(st.sampled_from(T.METRICS), min_size=1, max_size=3, unique=True),
       st.sampled_from(T.PROFILES))
def test_metrics_evaluate(arrays, metrics, profile):
    scores, labels, qid = arrays
    check(T.metrics_evaluate(scores, labels, qid, metrics, profile))


LOSSES = ["listnet", "listmle", "ranknet", "lambdaloss", "approx_ndcg", "pairwise_hinge", "pairwise_squared",
          "pointwise_squared", "pointwise_logistic", "pointwise_smooth_hinge", "smooth_dcg", "kendall_hinge",
          "rankboost", "sigmoid_ce"]


@fuzz(120)
@given(st.sampled_from(LOSSES), flat_arrays())
def test_losses_grad_hess(loss, arrays):
    scores, labels, qid = arrays
    sizes = np.bincount(qid) if len(qid) else np.zeros(0, dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(sizes[sizes > 0]))).astype(np.int64)
    check(T.losses_grad_hess(loss, scores, labels, offsets))


@fuzz(60)
@given(st.sampled_from(["linear", "gbdt", "neural"]), st.data())
def test_model_fit_predict(kind, data):
    n = data.draw(st.integers(2, 12))
    d = data.draw(st.integers(1, 3))
    vals = st.sampled_from([0.0, 1.0, -2.0, 0.5, 1e30, -1e30, 1e-30, 3.4e38, float("nan"), float("inf")])
    X = np.array(data.draw(st.lists(vals, min_size=n * d, max_size=n * d)), dtype=np.float64).reshape(n, d)
    y = np.array(data.draw(st.lists(st.sampled_from([0.0, 1.0, 2.0, 4.0, 1e308, -1.0, float("nan")]),
                                    min_size=n, max_size=n)))
    qid = np.sort(np.array(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))))
    X_test = np.array(data.draw(st.lists(vals, min_size=2 * d, max_size=2 * d)), dtype=np.float64).reshape(2, d)
    with np.errstate(all="ignore"):
        X32 = X.astype(np.float32) if data.draw(st.booleans()) else X
    check(T.model_fit_predict(kind, X32, y, qid, X_test))


# ------------------------------------------------------------------------- model files
@pytest.fixture(scope="module")
def loader():
    ld = T.ChildLoader(timeout=60)
    yield ld
    ld.close()


@pytest.fixture(scope="module")
def seed_models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    return T.model_files(str(folder)), folder


def test_model_loading_mutations(seed_models, loader):
    """Damaged files (digests stale) and forged ones (digests recomputed, booster text mutated)
    loaded in a worker process: every case a refusal or a valid model; an altered file never
    loads with other predictions."""
    import rankwise
    from rankwise.models import persistence

    files, folder = seed_models
    rng = random.Random(1717)
    bad = []
    n = 0
    for name, path in files.items():
        expected = rankwise.load(path).predict(T.PROBE)
        data = open(path, "rb").read()
        for k in range(25):  # careless damage, digests not recomputed
            case = os.path.join(folder, f"{name}-d{k}.npz")
            with open(case, "wb") as fh:
                fh.write(T.mutate_zip_bytes(data, rng))
            outcome, detail = loader(case, expected)
            n += 1
            if outcome not in ("ok", "rankwise_error"):
                bad.append((case, outcome, detail))
        if name in T.GBDT_SEEDS:
            entries = persistence.raw_entries(path)
            text = persistence._array(path, "booster", entries["booster"]).tobytes()
            for k in range(60):  # a forger's file: valid digests around a mutated booster text
                e = dict(entries, booster=persistence._npy_bytes(np.frombuffer(T.mutate_text(text, rng),
                                                                                dtype=np.uint8)))
                case = str(persistence.forge(os.path.join(folder, f"{name}-f{k}.npz"), e))
                outcome, detail = loader(case)
                n += 1
                if outcome not in ("ok", "rankwise_error"):
                    bad.append((case, outcome, detail))
    assert n == len(files) * 25 + len(T.GBDT_SEEDS) * 60
    assert not bad, bad[:5]


@fuzz(150)
@given(st.data())
def test_frames(data):
    n = data.draw(st.integers(1, 6))
    q = st.sampled_from([1, 2, "a", None, float("nan"), 2.5, 10**20, True])
    v = st.sampled_from([0.0, 1.0, 2.0, float("nan"), float("inf"), 1e308, -1.0, None, "x"])
    spec = (data.draw(st.lists(q, min_size=n, max_size=n)), data.draw(st.lists(v, min_size=n, max_size=n)),
            data.draw(st.lists(v, min_size=n, max_size=n)))
    check(T.frames(spec))


@fuzz(150)
@given(st.data())
def test_parquet(data):
    seed = T.parquet_seed() if not hasattr(test_parquet, "seed") else test_parquet.seed
    test_parquet.seed = seed
    check(T.parquet(data.draw(mutated(seed))))
