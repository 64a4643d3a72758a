"""Simulation protocols of issue 26: Plackett-Luce and several loggers, bias curves and click matrices from the
click fixtures, ClickLog.row_data, and ClickSimulation.counts / the deprecated aggregate .log."""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from rankwise.clicks import (ClickCounts, ClickLog, PlackettLucePolicy, PolicyMixture, click_dataset,
                             read_bias_curve, read_click_log, read_click_matrix, simulate_clicks_protocol)
from rankwise.data import make_synthetic
from rankwise.errors import InputError, ParseError


def fixtures_dir() -> Path:
    base = Path(os.environ.get("RANKWISE_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")
    d = base / "click_fixtures"
    if not d.is_dir():
        d = Path("/work/shared/data/click_fixtures")
    if not d.is_dir():
        pytest.skip(f"click fixtures absent: expected {base / 'click_fixtures'} (set RANKWISE_DATA)")
    return d


@pytest.fixture(scope="module")
def small():
    return make_synthetic(30, n_features=6, list_length=(6, 15), seed=5)


# -- ClickLog.row_data ----------------------------------------------------------------------------------------------

def test_row_data_is_kept_by_subset_split_and_the_long_table(tmp_path):
    log = ClickLog.from_arrays(["a", "b", "a"], [["x", "y"], ["z", "x", "w"], ["y", "x"]], [[1, 0], [0, 0, 1], [0, 1]],
                               row_data={"exposure": [[0.5, 0.25], [1.0, 0.125, 3.0e-5], [0.75, 0.5]]})
    np.testing.assert_array_equal(log.row_data["exposure"], [0.5, 0.25, 1.0, 0.125, 3.0e-5, 0.75, 0.5])
    sub = log.subset([2, 0])
    np.testing.assert_array_equal(sub.row_data["exposure"], [0.75, 0.5, 0.5, 0.25])
    tr, te = log.split(2 / 3)
    np.testing.assert_array_equal(te.row_data["exposure"], [0.75, 0.5])
    frame = log.to_frame()
    assert list(frame.columns) == ["session", "query", "rank", "doc", "clicked", "exposure"]
    path = tmp_path / "log.csv"
    # rows in any order within a session (sessions keep the order of their first row), CRLF line ends
    frame.sample(frac=1.0, random_state=1).sort_values("session", kind="stable").to_csv(
        path, index=False, lineterminator="\r\n")
    back = read_click_log(path, format="csv", row_data=("exposure",))
    np.testing.assert_array_equal(back.row_data["exposure"], log.row_data["exposure"])
    np.testing.assert_array_equal(back.clicked, log.clicked)
    with pytest.raises(InputError, match=r"row_data\['e'\] must have one entry per row \(7\)"):
        ClickLog(log.session_offsets, log.query, log.queries, log.doc, log.docs, log.clicked, row_data={"e": [1.0]})
    with pytest.raises(InputError, match="already the log's own columns"):
        ClickLog.from_frame(frame, row_data=("doc",))
    with pytest.raises(InputError, match=r"missing"):
        ClickLog.from_frame(frame, row_data=("propensity",))


# -- stochastic and several loggers ---------------------------------------------------------------------------------

def test_plackett_luce_logging(small):
    n = 40_000
    sim = simulate_clicks_protocol(small, n_sessions=n, eta=1.0, top_k=4, production_fraction=0.2,
                                   temperature=0.5, random_state=1)
    log, pol = sim.log, sim.policy
    assert isinstance(pol, PlackettLucePolicy) and pol.temperature == 0.5 and pol.top_k == 4
    assert log.n_sessions == n and log.max_rank == 4
    rows = log.docs[log.doc].astype(np.int64)
    P = pol.rank_marginals()
    # every displayed row carries its inclusion probability and its policy-aware propensity
    np.testing.assert_allclose(log.row_data["inclusion"], P[rows].sum(axis=1))
    np.testing.assert_allclose(log.row_data["exposure"], P[rows] @ sim.propensity)
    np.testing.assert_allclose(sim.policy_propensities().exposure, P @ sim.propensity)
    # the pages follow the rank marginals: shows of each (document, rank) against n_q P
    n_q = np.bincount(log.query, minlength=log.n_queries)
    qpos = {q: i for i, q in enumerate(log.queries)}
    qrow = np.repeat(np.asarray(sim.features.query_ids), np.diff(sim.features.query_offsets))
    sess_of_row = np.array([n_q[qpos[q]] for q in qrow])
    shows = np.zeros_like(P)
    np.add.at(shows, (rows, log.ranks - 1), 1)
    expect = sess_of_row[:, None] * P
    sd = np.sqrt(expect * (1 - P))
    ok = sd > 2
    assert np.abs((shows - expect)[ok] / sd[ok]).max() < 5.5
    # far more candidates are shown than the deterministic top 4
    det = simulate_clicks_protocol(small, n_sessions=n, top_k=4, production_fraction=0.2, random_state=1)
    assert len(np.unique(rows)) > 1.5 * len(np.unique(det.log.docs))


def test_policy_aware_labels_recover_the_relevance_of_unshown_documents(small):
    n = 300_000
    sim = simulate_clicks_protocol(small, n_sessions=n, eta=1.0, top_k=3, production_fraction=0.2,
                                   temperature=1.0, random_state=2)
    pp = sim.policy_propensities()
    data = click_dataset(sim.counts, sim.features, propensity=pp)
    rows = data.doc_ids.astype(np.int64)
    assert len(rows) == len(small.labels)  # every candidate: ρ > 0 for all
    # E[label] = ρ(y); variance of a label: r (θρ-weighted clicks) / (n_q ρ)
    n_of = dict(zip(sim.log.queries, np.bincount(sim.log.query)))
    n_q = np.array([n_of[q] for q in data.query_ids])
    n_row = np.repeat(n_q, np.diff(data.query_offsets))
    r, rho = sim.relevance[rows], pp.exposure[rows]
    se = np.sqrt(r * (1 / rho - r) / n_row)
    z = (data.labels - r) / se
    assert np.abs(z).max() < 5.5 and abs(z.mean()) < 0.3
    # documents the deterministic logger never shows: rank-based IPS has nothing (or 0), policy-aware is unbiased
    det = simulate_clicks_protocol(small, n_sessions=20_000, eta=1.0, top_k=3, production_fraction=0.2, random_state=2)
    hidden = np.setdiff1d(np.arange(len(small.labels)), det.log.docs.astype(np.int64))
    assert len(hidden) > 50
    lab = dict(zip(rows, data.labels))
    err = np.array([lab[h] for h in hidden]) - sim.relevance[hidden]
    assert abs(err.mean()) < 3 * np.sqrt(np.mean(se[np.isin(rows, hidden)] ** 2) / len(hidden))
    # the per-row exposures of the log give the same labels (one logger)
    by_row = click_dataset(sim.log, sim.features, exposure="log")
    got = dict(zip(by_row.doc_ids.astype(np.int64), by_row.labels))
    np.testing.assert_allclose([got[d] for d in got], [lab[d] for d in got], rtol=1e-9)


def test_several_loggers(small):
    sim = simulate_clicks_protocol(small, n_sessions=6000, top_k=5, production_fraction=0.3, n_loggers=3,
                                   random_state=4)
    log = sim.log
    logger = log.session_data["logger"]
    assert isinstance(sim.policy, PolicyMixture) and len(sim.loggers) == 3 and sim.production is sim.loggers[0]
    assert set(np.unique(logger)) == {0, 1, 2} and np.all(np.abs(np.bincount(logger) / 6000 - 1 / 3) < 0.03)
    # each session shows its own logger's deterministic page, with that logger's exposure θ_k
    rows = log.docs[log.doc].astype(np.int64)
    for s in range(0, 6000, 97):
        pol = sim.policy.policies[logger[s]]
        a, b = sim.features.query_offsets[[np.flatnonzero(np.asarray(sim.features.query_ids)
                                                          == log.queries[log.query[s]])[0] + i for i in (0, 1)]]
        page = a + np.argsort(-pol.scores[a:b], kind="stable")[:5]
        o = log.session_offsets
        np.testing.assert_array_equal(rows[o[s]:o[s + 1]], page)
        np.testing.assert_allclose(log.row_data["exposure"][o[s]:o[s + 1]], sim.propensity[: len(page)])
    # the loggers disagree: the same (query, document) at different ranks (interventions to harvest)
    t = log.pair_table()
    assert (t["mean_rank"] % 1 != 0).mean() > 0.2
    mixed = sim.policy_propensities().exposure
    np.testing.assert_allclose(mixed, np.mean([p.exposure(sim.propensity) for p in sim.policy.policies], axis=0))


def test_deterministic_logger_is_unchanged(small):
    a = simulate_clicks_protocol(small, n_sessions=3000, top_k=4, production_fraction=0.2, random_state=3)
    b = simulate_clicks_protocol(small, n_sessions=3000, top_k=4, production_fraction=0.2, random_state=3,
                                 temperature=0.0)
    for name in ("session_offsets", "doc", "docs", "clicked", "query", "queries"):
        np.testing.assert_array_equal(getattr(a.log, name), getattr(b.log, name))
    assert a.policy.temperature == 0 and set(a.log.row_data) == {"inclusion", "exposure"}
    assert np.all(a.log.row_data["inclusion"] == 1.0)
    np.testing.assert_array_equal(a.log.row_data["exposure"], a.propensity[a.log.ranks - 1])


def test_aggregate_counts_and_the_deprecated_log(small):
    agg = simulate_clicks_protocol(small, n_sessions=5000, top_k=4, production_fraction=0.2, random_state=3,
                                   aggregate=True)
    assert agg.session_log is None and isinstance(agg.counts, ClickCounts)
    with pytest.warns(DeprecationWarning, match="ClickSimulation.counts"):
        assert agg.log is agg.counts
    ses = simulate_clicks_protocol(small, n_sessions=500, top_k=4, production_fraction=0.2, random_state=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert isinstance(ses.log, ClickLog)
        c = ses.counts
    np.testing.assert_array_equal(c.clicks, ses.log.counts().clicks)
    with pytest.raises(InputError, match="one deterministic logger"):
        simulate_clicks_protocol(small, n_sessions=10, aggregate=True, temperature=1.0)
    with pytest.raises(InputError, match="one deterministic logger"):
        simulate_clicks_protocol(small, n_sessions=10, aggregate=True, n_loggers=2)


@pytest.mark.parametrize("kwargs,match", [
    (dict(temperature=-1.0), "temperature"), (dict(temperature="hot"), "temperature"),
    (dict(n_loggers=0), "n_loggers"), (dict(n_loggers=1.5), "n_loggers"),
    (dict(position_bias=[1.0, 0.5]), r"every rank 1..4"), (dict(position_bias=[1.0, 0.5, 0.0, 0.1]), "rank 3"),
    (dict(position_bias=[1.0, 0.5, 1.5, 0.1]), "rank 3"), (dict(click_model="matrix"), "click_matrix"),
    (dict(click_matrix=np.ones((5, 5))), "click_model='matrix'"),
    (dict(click_model="matrix", click_matrix=np.full((2, 5), 0.5)), "grades 0..1"),
    (dict(click_model="matrix", click_matrix=np.full((5, 5), 1.5)), "probabilities"),
])
def test_simulation_errors(small, kwargs, match):
    with pytest.raises(InputError, match=match):
        simulate_clicks_protocol(small, n_sessions=10, top_k=4, **kwargs)


# -- bias profiles --------------------------------------------------------------------------------------------------

def test_baidu_bias_curves():
    d = fixtures_dir() / "baidu_ultr_propensities"
    g = read_bias_curve(d / "global_all_pairs.csv")
    assert g.shape == (22,) and g[0] == 1.0 and abs(g[1] - 0.6737794280052185) < 1e-15
    assert np.all(np.diff(g[:10]) < 0)
    ctr = read_bias_curve(d / "ctr.csv", max_rank=19)
    assert len(ctr) == 19 and abs(ctr[1] - 0.5097289790607338) < 1e-15
    with pytest.raises(ParseError, match=r"ctr.csv:21: position 20: .*> 0.*max_rank"):
        read_bias_curve(d / "ctr.csv")
    with pytest.raises(ParseError, match=r"pivot_one.csv:13: position 12"):
        read_bias_curve(d / "pivot_one.csv")
    with pytest.raises(ParseError, match=r"adjacent_chain.csv:19: position 18"):
        read_bias_curve(d / "adjacent_chain.csv", max_rank=20)


def test_bias_curve_parse_errors(tmp_path):
    p = tmp_path / "curve.csv"
    p.write_bytes(b"position,est\r\n1,1.0\r\n2,6.5e-1\r\n3,0.41\r\n")
    np.testing.assert_array_equal(read_bias_curve(p), [1.0, 0.65, 0.41])
    for text, match in [("pos,est\n1,1.0\n", "curve.csv:1: expected the header"),
                        ("position,est\n1,1.0\n3,0.5\n", "curve.csv:3: expected position 2"),
                        ("position,est\n1,1.0\n2,\n", "curve.csv:3: position 2 has no value"),
                        ("position,est\n1,1.0\n2,abc\n", "curve.csv:3: .*must be a number"),
                        ("position,est\n1,1.0\n2,-0.5\n", "curve.csv:3: .*> 0"),
                        ("position,est\n1,1.0\n2,0.5,7\n", "curve.csv:3: expected 2 cells"),
                        ("position,est\n", "no positions")]:
        p.write_text(text)
        with pytest.raises(ParseError, match=match):
            read_bias_curve(p)
    p.write_text("position,est\n1,1.0\n2,0.5\n")
    with pytest.raises(ParseError, match="max_rank=3"):
        read_bias_curve(p, max_rank=3)
    with pytest.raises(InputError, match="does not exist"):
        read_bias_curve(tmp_path / "absent.csv")


def test_simulation_under_the_baidu_curve(small):
    curve = read_bias_curve(fixtures_dir() / "baidu_ultr_propensities" / "global_all_pairs.csv")
    sim = simulate_clicks_protocol(small, n_sessions=60_000, top_k=6, production_fraction=0.2, random_state=0,
                                   position_bias=curve)
    np.testing.assert_array_equal(sim.propensity, curve[:6])
    log = sim.log
    rows = log.docs[log.doc].astype(int)
    r = log.ranks - 1
    mean_rho = np.bincount(r, weights=sim.relevance[rows]) / np.bincount(r)
    p, n_k = curve[:6] * mean_rho, np.bincount(r)
    assert np.all(np.abs(log.ctr_by_rank() - p) < 5 * np.sqrt(p * (1 - p) / n_k))
    # a path works too, and the curve is not a power law: no η fits ranks 2..6 within 5%
    again = simulate_clicks_protocol(small, n_sessions=100, top_k=6, production_fraction=0.2, random_state=0,
                                     position_bias=fixtures_dir() / "baidu_ultr_propensities" / "global_all_pairs.csv")
    np.testing.assert_array_equal(again.propensity, sim.propensity)
    k = np.arange(2, 7)
    eta = -np.log(curve[1:6]) / np.log(k)
    assert eta.max() / eta.min() > 1.2


def test_tiangong_click_matrix(small):
    d = fixtures_dir() / "ultra_click_models" / "ClickModel"
    m = read_click_matrix(d / "click_matrix_tiangong.json")
    assert m.shape == (5, 10) and abs(m[4, 0] - 0.7420619071392911) < 1e-15
    pbm = read_click_matrix(d / "pbm_0.1_1.0_4_1.0.json")
    np.testing.assert_allclose(pbm[:, 1], np.array([0.1, 0.16, 0.28, 0.52, 1.0]) * 0.61)
    with pytest.raises(ParseError, match="not a click matrix"):
        read_click_matrix(d / "cascade_0.1_1.0_4_1.0.json")
    # clicks drawn from the matrix: CTR of (grade, rank) cells against the table
    sim = simulate_clicks_protocol(small, n_sessions=100_000, top_k=10, production_fraction=0.2, random_state=0,
                                   click_model="matrix", click_matrix=d / "click_matrix_tiangong.json")
    assert sim.propensity is None and "exposure" not in sim.log.row_data
    log = sim.log
    y = small.labels[log.docs[log.doc].astype(int)].astype(int)
    r = log.ranks - 1
    cell = y * 10 + r
    n = np.bincount(cell, minlength=50)
    c = np.bincount(cell, weights=log.clicked, minlength=50)
    p = m.ravel()
    ok = n > 200
    z = (c[ok] - n[ok] * p[ok]) / np.sqrt(n[ok] * p[ok] * (1 - p[ok]))
    assert ok.sum() > 15 and np.abs(z).max() < 5.5


def test_click_matrix_json_errors(tmp_path):
    p = tmp_path / "cm.json"
    p.write_text('{\n  "model_name": "click_matrix_model",\n  "click_prob": [[0.1, 0.2],\n [0.3, }')
    with pytest.raises(ParseError, match=r"cm.json:4: not valid JSON"):
        read_click_matrix(p)
    p.write_text('{"model_name": "click_matrix_model", "click_prob": [[0.1, 0.2], [0.3]]}')
    with pytest.raises(ParseError, match="rectangular"):
        read_click_matrix(p)
    p.write_text('{"model_name": "click_matrix_model", "click_prob": [[0.1, 1.2]]}')
    with pytest.raises(ParseError, match=r"\[0, 1\]"):
        read_click_matrix(p)
    p.write_text('[1, 2]')
    with pytest.raises(ParseError, match="model_name"):
        read_click_matrix(p)
