"""ClickLog readers and aggregation; IPS click datasets; the simulation protocol."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rankwise.clicks import (ClickLog, click_dataset, fit_debiased, ips_weights, read_click_log,
                             simulate_clicks_protocol)
from rankwise.data import RankingDataset, make_synthetic
from rankwise.errors import InputError, ParseError


def test_yandex_sample(data_dir):
    path = data_dir / "yandex_clicks" / "sessions.txt"
    if not path.exists():
        pytest.skip(f"Yandex click sample absent: expected {path}")
    log = read_click_log(path, format="yandex_sample")
    # counts stated in the data's README
    assert log.n_sessions == 35064 and log.n_queries == 20
    assert int(log.session_data["click_events"].sum()) == 50321
    assert log.max_rank == 10 and np.all(log.sizes == 10)
    ctr = log.ctr_by_rank()
    assert 0.2 < ctr[0] < 0.3 and ctr[-1] < 0.06


def test_yandex_parse_errors(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_text("1_1\t5,6,7 : 5;\n2_1\t5,6 missing colon;")
    with pytest.raises(ParseError, match=r"bad.txt:2"):
        read_click_log(p)


def test_long_table_round_trip(tmp_path):
    log = ClickLog.from_arrays(["a", "b", "a"], [["x", "y"], ["z", "x", "w"], ["y", "x"]], [[1, 0], [0, 0, 1], [0, 1]])
    # rows in any order within a session (sessions keep the order of their first row)
    frame = log.to_frame().sample(frac=1.0, random_state=0).sort_values("session", kind="stable")
    path = tmp_path / "log.csv"
    frame.to_csv(path, index=False)
    back = read_click_log(path, format="csv")
    assert back.n_sessions == 3
    np.testing.assert_array_equal(back.clicked, log.clicked)
    np.testing.assert_array_equal(back.docs[back.doc], log.docs[log.doc])
    pq = tmp_path / "log.parquet"
    frame.rename(columns={"clicked": "click"}).to_parquet(pq)
    assert read_click_log(pq, format="parquet", clicked="click").n_pairs == log.n_pairs
    tab = log.pair_table()
    row = tab[(tab["query"] == "a") & (tab["doc"] == "x")].iloc[0]
    assert row.impressions == 2 and row.clicks == 2 and row.mean_rank == 1.5
    qt = log.query_table()
    assert qt.set_index("query").loc["a", "sessions"] == 2


def test_long_table_errors():
    bad = pd.DataFrame({"session": [1, 1], "query": ["a", "a"], "rank": [1, 3], "doc": [1, 2], "clicked": [0, 1]})
    with pytest.raises(InputError, match=r"ranks \[1, 3\]"):
        ClickLog.from_frame(bad)
    bad2 = bad.assign(rank=[1, 2], query=["a", "b"])
    with pytest.raises(InputError, match="more than one query"):
        ClickLog.from_frame(bad2)
    with pytest.raises(InputError, match="columns"):
        ClickLog.from_frame(bad.drop(columns="doc"))
    with pytest.raises(InputError, match="0/1"):
        ClickLog.from_frame(bad.assign(rank=[1, 2], clicked=[0, 2]))


def tiny_features():
    X = np.arange(10, dtype=np.float32).reshape(5, 2)
    return RankingDataset.from_arrays(X, np.zeros(5), ["a", "a", "a", "b", "b"], doc_ids=["x", "y", "z", "x", "w"])


def test_click_dataset_labels_by_formula():
    log = ClickLog.from_arrays(["a", "a", "b"], [["x", "y"], ["y", "x"], ["w", "x"]], [[1, 1], [0, 1], [1, 0]])
    theta = np.array([1.0, 0.25])
    ds = click_dataset(log, tiny_features(), propensity=theta)
    lab = dict(zip(zip(np.repeat(ds.query_ids, np.diff(ds.query_offsets)), ds.doc_ids), ds.labels))
    # query a, 2 sessions: x clicked at rank 1 and at rank 2; y clicked at rank 2 only
    assert lab[("a", "x")] == pytest.approx((1 / 1.0 + 1 / 0.25) / 2)
    assert lab[("a", "y")] == pytest.approx((1 / 0.25) / 2)
    assert lab[("b", "w")] == pytest.approx(1.0) and lab[("b", "x")] == 0
    raw = click_dataset(log, tiny_features())
    assert sorted(raw.labels.tolist()) == sorted([1.0, 0.5, 1.0, 0.0])
    np.testing.assert_array_equal(ds.X[ds.doc_ids == "w"], [[8, 9]])


def test_ips_weights_and_clipping():
    np.testing.assert_allclose(ips_weights([1, 2, 3], [1.0, 0.5, 0.1]), [1, 2, 10])
    np.testing.assert_allclose(ips_weights([1, 2, 3], [1.0, 0.5, 0.1], clip=0.25), [1, 2, 4])
    with pytest.raises(InputError, match="> 0"):
        ips_weights([1, 2], [1.0, 0.0])
    with pytest.raises(InputError, match="clip"):
        ips_weights([1], [1.0], clip=2)


def test_fit_debiased_refuses_losses_not_linear_in_labels():
    from rankwise.models import LinearRanker

    log = ClickLog.from_arrays(["a"], [["x", "y"]], [[1, 0]])
    with pytest.raises(InputError, match="not affine"):
        fit_debiased(LinearRanker(loss="listnet"), log, tiny_features(), [1.0, 0.5])
    m = fit_debiased(LinearRanker(loss="op_pairwise", max_iter=20), log, tiny_features(), [1.0, 0.5])
    assert np.isfinite(m.predict(tiny_features().X)).all()


def test_simulation_protocol_pbm():
    ds = make_synthetic(60, n_features=10, list_length=(12, 20), seed=0)
    sim = simulate_clicks_protocol(ds, n_sessions=30000, eta=1.0, top_k=8, production_fraction=0.1, random_state=0)
    log = sim.log
    assert log.n_sessions == 30000 and log.max_rank == 8
    np.testing.assert_allclose(sim.propensity, 1.0 / np.arange(1, 9))
    # CTR at rank k = θ_k × mean ρ of the documents shown at k
    rows = log.docs[log.doc].astype(int)
    r = log.ranks - 1
    mean_rho = np.bincount(r, weights=sim.relevance[rows]) / np.bincount(r)
    np.testing.assert_allclose(log.ctr_by_rank(), sim.propensity * mean_rho, rtol=0.08)
    ds_ips = click_dataset(log, sim.features, propensity=sim.propensity)
    assert ds_ips.n_queries == len(np.unique(log.queries))
    cas = simulate_clicks_protocol(ds, n_sessions=2000, click_model="cascade", top_k=8, random_state=0)
    assert cas.propensity is None and cas.log.n_sessions == 2000


def test_simulation_protocol_display_depth():
    # top_k=None: every session shows the whole ranked list (Joachims et al. 2017), so every document is
    # shown and the propensities run to the longest list
    ds = make_synthetic(30, n_features=6, list_length=(5, 14), seed=1)
    sim = simulate_clicks_protocol(ds, n_sessions=3000, eta=2.0, top_k=None, production_fraction=0.1, random_state=0)
    lengths = np.diff(ds.query_offsets)
    assert sim.top_k is None and sim.log.max_rank == lengths.max()
    np.testing.assert_allclose(sim.propensity, (1.0 / np.arange(1, lengths.max() + 1)) ** 2)
    np.testing.assert_array_equal(np.sort(np.unique(sim.log.docs.astype(int))), np.arange(len(ds.labels)))
    assert click_dataset(sim.log, sim.features).X.shape[0] == len(ds.labels)
    # a session's page is its query's full list in production order
    sizes = np.diff(sim.log.session_offsets)
    qid_of_session = np.asarray(sim.log.queries)[sim.log.query]
    length_of = dict(zip(np.asarray(ds.query_ids), lengths))
    assert all(sizes[i] == length_of[qid_of_session[i]] for i in range(50))
    top = simulate_clicks_protocol(ds, n_sessions=3000, eta=2.0, top_k=4, production_fraction=0.1, random_state=0)
    assert top.log.max_rank == 4 and len(np.unique(top.log.docs)) < len(ds.labels)
    for bad in (0, 2.5, True, "all"):
        with pytest.raises(InputError, match="top_k"):
            simulate_clicks_protocol(ds, n_sessions=10, top_k=bad)
