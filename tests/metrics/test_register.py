"""rankwise.metrics.register: a measure of one's own, read by name like a built-in one (get_metric,
evaluate, the command line), its name and signature checked when it is registered."""
from __future__ import annotations

import math

import numpy as np
import pytest

from rankwise import metrics
from rankwise.errors import InputError


def linear_dcg(labels, *, k=None):
    """DCG with linear gain written from its definition: sum_i y_i / log2(i + 1), ranks i = 1..k."""
    return sum(y / math.log2(i + 2) for i, y in enumerate(labels[:k] if k is not None else labels))


def hits(labels, *, k=None, threshold=1.0):
    """Number of relevant (label >= threshold) documents in the top k; undefined on a query without one."""
    if not np.any(labels >= threshold):
        return None
    return int(np.sum(labels[:k] >= threshold))


@pytest.fixture
def registered():
    names = []

    def add(name, fn, **kw):
        m = metrics.register(name, fn, **kw)
        names.append(name)
        return m
    yield add
    for name in names:
        metrics.unregister(name)


def _data(seed=0, n_queries=12):
    """Runs as systems write them: full-precision and scientific-notation scores, ragged lists."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 25, n_queries)
    q = np.repeat(np.arange(n_queries) * 7 + 3, sizes)
    s = rng.standard_normal(len(q)) * 10.0 ** rng.integers(-8, 4, len(q))
    y = rng.integers(0, 5, len(q)).astype(float)
    y[q == q[0]] = 0.0  # one query without any relevant document
    return s, y, q


def test_a_registered_measure_is_read_by_get_metric_and_evaluate(registered):
    s, y, q = _data()
    m = registered("linear_dcg", linear_dcg, takes_k=True)
    assert m.spec == "linear_dcg" and "linear_dcg" in metrics.available_metrics()
    assert metrics.get_metric("Linear_DCG@5").k == 5
    for k in (None, 1, 5, 30):
        want = metrics.dcg(s, y, qid=q, k=k, gain="linear", reduction="none")
        got = metrics.get_metric("linear_dcg" if k is None else f"linear_dcg@{k}")(s, y, qid=q, reduction="none")
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    res = metrics.evaluate(s, y, q, metrics=["linear_dcg@5", "dcg@5"], gain="linear")
    assert res.mean["linear_dcg@5"] == pytest.approx(res.mean["dcg@5"], rel=1e-12)
    np.testing.assert_allclose(res.per_query["linear_dcg@5"].to_numpy(float), res.per_query["dcg@5"].to_numpy(float),
                               rtol=1e-12)


def test_options_and_undefined_queries(registered):
    s, y, q = _data(1)
    registered("hits", hits, takes_k=True, options=("threshold",))
    for thr in (1.0, 3.0):
        res = metrics.evaluate(s, y, q, metrics=["hits@5", "P@5"], threshold=thr, empty="drop")
        prec = metrics.precision(s, y, qid=q, k=5, threshold=thr, reduction="none")
        # P@k divides by k, even where the list is shorter
        relevant = np.array([np.any(y[q == v] >= thr) for v in np.unique(q)])
        np.testing.assert_allclose(res.per_query["hits@5"].to_numpy(float)[relevant], (prec * 5)[relevant])
        assert res.per_query["hits@5"].isna().to_numpy().tolist() == (~relevant).tolist()  # None -> empty


def test_tied_scores_are_averaged_exactly_over_their_orders(registered):
    """ties='average': the mean over every order of the tied labels, as the built-in kernels compute it."""
    import itertools

    registered("linear_dcg", linear_dcg, takes_k=True)
    rng = np.random.default_rng(3)
    q = np.repeat(np.arange(40), rng.integers(1, 9, 40))
    s = np.round(rng.standard_normal(len(q)), 1) * 1e-3  # many ties, within and across labels
    y = rng.integers(0, 4, len(q)).astype(float)
    for k in (None, 2, 5):
        got = metrics.get_metric("linear_dcg" if k is None else f"linear_dcg@{k}")(s, y, qid=q, reduction="none")
        want = metrics.dcg(s, y, qid=q, k=k, gain="linear", ties="average", reduction="none")
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    # brute force on one small query: every permutation of the tied items, equally likely
    s1, y1 = np.array([0.5, 0.5, 0.5, 0.1, 0.1]), np.array([2.0, 0.0, 1.0, 0.0, 3.0])
    perms = [p + r for p in itertools.permutations([0, 1, 2]) for r in itertools.permutations([3, 4])]
    brute = np.mean([linear_dcg(y1[list(p)], k=2) for p in perms])
    assert metrics.get_metric("linear_dcg@2")(s1, y1) == pytest.approx(brute, rel=1e-12)
    for ties in ("pessimistic", "optimistic", "input"):
        got = metrics.evaluate(s, y, q, metrics=["linear_dcg", "dcg"], gain="linear", ties=ties).mean
        assert got["linear_dcg"] == pytest.approx(got["dcg"], rel=1e-12)
    # too many orders to enumerate (30 tied documents, 15 relevant): refused, naming the way out
    with pytest.raises(InputError, match="too many to enumerate: pass ties='pessimistic'"):
        metrics.evaluate(np.zeros(30), np.arange(30) % 2, None, metrics=["linear_dcg"])


def test_the_command_line_reads_a_registered_name(registered, tmp_path, capsys):
    from rankwise.cli.main import main
    from rankwise.data import RankingDataset, write_svmlight

    s, y, q = _data(2)
    X = np.random.default_rng(2).standard_normal((len(q), 3))
    write_svmlight(RankingDataset.from_arrays(X, y, q), tmp_path / "test.txt")
    (tmp_path / "scores.txt").write_text("".join(f"{float(v)!r}\r\n" for v in s))  # CRLF, full precision
    registered("linear_dcg", linear_dcg, takes_k=True)
    code = main(["evaluate", str(tmp_path / "test.txt"), "--scores", str(tmp_path / "scores.txt"),
                 "--metrics", "linear_dcg@10,dcg@10", "--convention", "gain=linear"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    row = {line.split()[0]: float(line.split()[-1]) for line in out.splitlines()
           if line.split() and line.split()[0] in ("linear_dcg@10", "dcg@10")}
    want = metrics.dcg(s, y, qid=q, k=10, gain="linear")
    assert row["linear_dcg@10"] == pytest.approx(want, abs=5e-5) and row["dcg@10"] == row["linear_dcg@10"]


def test_registration_is_validated(registered):
    for name, match in [("ndcg", "already registered"), ("ap", "an alias of 'map'"), ("p", "alias"),
                        ("map_cut", "alias"), ("success", "already registered"), ("all_trec", "measure group"),
                        ("relstring_5", "reserved"), ("NDCG2", "lower-case identifier"), ("a@3", "lower-case"),
                        ("", "lower-case"), (3, "lower-case")]:
        with pytest.raises(InputError, match=match):
            metrics.register(name, linear_dcg)
    with pytest.raises(InputError, match="fn must be callable"):
        metrics.register("mine", 3.0)
    with pytest.raises(InputError, match="takes no keyword 'k'"):
        metrics.register("mine", lambda labels: 1.0, takes_k=True)
    with pytest.raises(InputError, match="takes no keyword 'threshold'"):
        metrics.register("mine", lambda labels, *, k=None: 1.0, takes_k=True, options=("threshold",))
    with pytest.raises(InputError, match="requires 'alpha'"):
        metrics.register("mine", lambda labels, alpha: 1.0)
    with pytest.raises(InputError, match="labels of one query as its first argument"):
        metrics.register("mine", lambda *, k=None: 1.0)
    with pytest.raises(InputError, match="'alpha' is not a measure convention"):
        metrics.register("mine", lambda labels, **kw: 1.0, options=("alpha",))
    with pytest.raises(InputError, match="'ties' is not a measure convention"):
        metrics.register("mine", lambda labels, **kw: 1.0, options=("ties",))
    assert "mine" not in metrics.available_metrics()  # nothing half-registered
    registered("mine", lambda labels, **kw: float(len(labels)))
    with pytest.raises(InputError, match="already registered"):
        metrics.register("mine", linear_dcg)
    with pytest.raises(InputError, match="metric 'mine' takes no cutoff"):
        metrics.get_metric("mine@3")
    with pytest.raises(InputError, match="was not added by rankwise.metrics.register"):
        metrics.unregister("ndcg")


def test_a_bad_value_names_the_measure_and_query(registered):
    registered("broken", lambda labels: float("nan") if labels.sum() > 2 else 0.5)
    with pytest.raises(InputError, match=r"measure 'broken' returned nan on query 1 \(query id b\)"):
        metrics.evaluate([0.3, 0.1, 2e-3, 1.5e-9], [0.0, 1.0, 2.0, 3.0], ["a", "a", "b", "b"], metrics=["broken"])
    registered("boolean", lambda labels: True)
    with pytest.raises(InputError, match="must return a finite number"):
        metrics.get_metric("boolean")([0.2, 0.1], [1.0, 0.0])


def test_theory_reads_names_with_the_same_parser(registered):
    from rankwise.theory.gppm import get_measure

    registered("mine", lambda labels: 1.0)
    with pytest.raises(InputError, match="'mine' .* has no GPPM or RankMeasure form"):
        get_measure("mine")
    # trec_eval's spellings reach theory through the registry's parser
    y = np.array([2.0, 0.0, 1.0, 1.0])
    sigma = [3, 0, 2, 1]
    assert get_measure("P_2").value(y, sigma) == get_measure("p@2").value(y, sigma)
    assert get_measure("ndcg_cut_3").value(y, sigma) == get_measure("ndcg@3").value(y, sigma)
    with pytest.raises(InputError, match="'map' takes no cutoff here"):
        get_measure("map@5")
