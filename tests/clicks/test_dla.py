"""DLA (Ai et al., SIGIR 2018) on the shared torch loop: its losses against the paper's formulas by naive loops,
the merge of repeated pages against the per-session objective, propensity recovery on a simulated PBM log
with known η, and the estimator contract (clone, save/load, grid search, early stopping, n_jobs)."""
from __future__ import annotations

import math
import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from rankwise.clicks import DLA, ClickLog, session_dataset, simulate_clicks_protocol
from rankwise.data import RankingDataset, make_synthetic
from rankwise.errors import InputError, NotFittedError

torch = pytest.importorskip("torch")


# ----------------------------------------------------------------------------- the losses, by naive loops

def _naive_page_losses(s, g, c):
    """Ranker and tower loss of one page (lists of floats; rank k = index k) straight from the paper."""
    n = len(s)
    r = [math.exp(v) / sum(math.exp(u) for u in s) for v in s]
    t = [math.exp(v) / sum(math.exp(u) for u in g[:n]) for v in g[:n]]
    l_rank = -sum(c[k] * min(t[0] / t[k], math.exp(20)) * math.log(r[k]) for k in range(n))
    l_prop = -sum(c[k] * min(r[0] / r[k], math.exp(20)) * math.log(t[k]) for k in range(n))
    # gradients with the weights held fixed: d/ds_j -sum_k a_k log r_k = sum_k a_k (r_j - [j = k])
    a = [c[k] * min(t[0] / t[k], math.exp(20)) for k in range(n)]
    b = [c[k] * min(r[0] / r[k], math.exp(20)) for k in range(n)]
    d_s = [sum(a) * r[j] - a[j] for j in range(n)]
    d_g = [sum(b) * t[j] - b[j] for j in range(n)]
    return l_rank, l_prop, d_s, d_g


def test_losses_and_gradients_equal_the_paper_formulas_on_a_tiny_batch():
    from rankwise.clicks.dla import dla_losses

    rng = np.random.default_rng(0)
    sizes = [4, 2, 3]
    L = max(sizes)
    where = np.arange(L)[None, :] < np.array(sizes)[:, None]
    scores = torch.tensor(np.where(where, rng.normal(scale=2.0, size=where.shape), 0.0), requires_grad=True)
    logits = torch.tensor(rng.normal(size=L), requires_grad=True)
    clicks = np.where(where, rng.integers(0, 3, where.shape), 0).astype(float)  # merged pages: counts
    clicks[1, 1] = 1.0  # page 2 has a click below rank 1
    l_rank, l_prop = dla_losses(scores, logits, torch.tensor(clicks), torch.tensor(where))
    value = lambda t: t.detach().item()  # noqa: E731
    want = [_naive_page_losses(scores.detach().numpy()[i, :n].tolist(), logits.detach().numpy().tolist(),
                               clicks[i, :n].tolist()) for i, n in enumerate(sizes)]
    assert value(l_rank) == pytest.approx(sum(w[0] for w in want), rel=1e-12)
    assert value(l_prop) == pytest.approx(sum(w[1] for w in want), rel=1e-12)
    (gs,) = torch.autograd.grad(l_rank, scores, retain_graph=True)
    assert torch.autograd.grad(l_rank, logits, retain_graph=True, allow_unused=True)[0] is None  # θ weights fixed
    for i, n in enumerate(sizes):
        np.testing.assert_allclose(gs.numpy()[i, :n], want[i][2], rtol=1e-10, atol=1e-12)
        assert np.all(gs.numpy()[i, n:] == 0)
    (gg,) = torch.autograd.grad(l_prop, logits, retain_graph=True)
    assert torch.autograd.grad(l_prop, scores, allow_unused=True)[0] is None  # r weights fixed
    np.testing.assert_allclose(gg.numpy(), np.sum([np.pad(w[3], (0, L - len(w[3]))) for w in want], 0),
                               rtol=1e-10, atol=1e-12)


def test_inverse_weights_are_clipped_at_e20():
    from rankwise.clicks.dla import dla_losses

    scores = torch.tensor([[0.0, 0.0]], dtype=torch.float64)
    logits = torch.tensor([30.0, 0.0], dtype=torch.float64)  # θ_1/θ_2 = e^30 unclipped
    clicks = torch.tensor([[0.0, 1.0]], dtype=torch.float64)
    l_rank, _ = dla_losses(scores, logits, clicks, torch.ones(1, 2, dtype=bool))
    assert float(l_rank) == pytest.approx(math.exp(20) * math.log(2), rel=1e-12)


def test_a_row_without_results_adds_nothing_and_passes_no_nan_back():
    """A padded batch row with no real item (the log-softmax over it is -inf everywhere) contributes 0 to both
    losses and a zero gradient; the other rows' values and gradients are those of the batch without it."""
    from rankwise.clicks.dla import dla_losses

    rng = np.random.default_rng(1)
    for dtype in (torch.float32, torch.float64):
        where = torch.tensor([[True, True, True], [False, False, False], [True, True, False]])
        s0 = torch.tensor(rng.normal(size=(3, 3)), dtype=dtype)
        g0 = torch.tensor(rng.normal(size=3), dtype=dtype)
        clicks = torch.tensor([[0.0, 1.0, 1.0], [0.0, 0.0, 0.0], [1.0, 2.0, 0.0]], dtype=dtype)
        keep = torch.tensor([0, 2])
        got, want = [], []
        for rows, out in ((torch.arange(3), got), (keep, want)):
            s, g = s0[rows].clone().requires_grad_(True), g0.clone().requires_grad_(True)
            l_rank, l_prop = dla_losses(s, g, clicks[rows], where[rows])
            (l_rank + l_prop).backward()
            out += [l_rank.detach(), l_prop.detach(), s.grad, g.grad]
        assert torch.isfinite(got[2]).all() and torch.all(got[2][1] == 0)
        assert torch.allclose(got[0], want[0]) and torch.allclose(got[1], want[1])
        assert torch.allclose(got[2][keep], want[2]) and torch.allclose(got[3], want[3])


def test_unbound_loss_refuses_and_the_bound_loss_reads_the_tower():
    from rankwise.clicks.dla import _build_dla_module, _DLALoss, dla_losses

    with pytest.raises(TypeError, match="bind"):
        _DLALoss()(torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2, dtype=bool))
    module = _build_dla_module(torch.nn.Linear(3, 1), 5)
    with torch.no_grad():
        module.tower.logits.copy_(torch.tensor([0.0, -1.0, -2.0, 0.5, 1.0]))
    s = torch.tensor([[0.3, -0.2, 1.0], [0.1, 0.4, 0.0]])
    y = torch.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    where = torch.tensor([[True, True, True], [True, True, False]])
    w = torch.tensor([[2.0, 2.0, 2.0], [0.5, 0.5, 0.0]])
    got = _DLALoss().bind(module)(s, y, where, w)
    want = sum(dla_losses(s, module.tower.logits[:3], y * w, where))
    assert got.item() == pytest.approx(want.item(), rel=1e-6)
    with pytest.raises(InputError, match="a page of 6 results, but the propensity tower has 5 ranks"):
        _DLALoss().bind(module)(torch.zeros(1, 6), torch.zeros(1, 6), torch.ones(1, 6, dtype=bool))


@pytest.mark.parametrize("collide", [False, True])
def test_row_codes_are_equal_exactly_for_equal_rows(monkeypatch, collide):
    """Rows are hashed; a hash shared by different rows (forced here) falls back to comparing the rows."""
    import pandas as pd
    import scipy.sparse as sp

    from rankwise.clicks.dla import _row_codes

    rng = np.random.default_rng(3)
    base = rng.normal(size=(6, 5)).astype(np.float32)
    base[2] = base[1]
    base[3, 0] = np.nextafter(base[1, 0], np.float32(1))  # one ulp from row 1 elsewhere equal
    base[3, 1:] = base[1, 1:]
    X = base[rng.integers(0, 6, 200)]
    if collide:  # every row hashed alike
        real = pd.factorize
        monkeypatch.setattr(pd, "factorize", lambda v, *a, **k: real(np.zeros_like(v), *a, **k)
                            if v.dtype == np.uint64 else real(v, *a, **k))
    for Xw in (X, np.ascontiguousarray(X[:, :4]), X.astype(np.float64)):  # rows of 20, 16 and 40 bytes
        same = (Xw[:, None, :] == Xw[None, :, :]).all(-1)
        for M in (Xw, sp.csr_matrix(Xw)):
            codes = _row_codes(M)
            np.testing.assert_array_equal(codes[:, None] == codes[None, :], same)


class _Linear(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = torch.nn.Linear(d, 1)

    def forward(self, x, where):
        return self.lin(x).squeeze(-1)


def test_merging_repeated_pages_keeps_the_per_session_objective():
    """Sessions repeating a page are merged (clicks summed): the loss over the merged pages, a mean over pages,
    equals the mean loss over the sessions, for the same network, with and without session weights."""
    from rankwise.clicks.dla import _build_dla_module, _DLALoss, _merge_repeated_pages
    from rankwise.data.ranking_input import check_ranking_input
    from rankwise.train.loop import train_loss_sum

    rng = np.random.default_rng(1)
    pages = [rng.normal(size=(n, 4)).astype(np.float32) for n in (5, 3, 5)]
    X, clicks, qid = [], [], []
    for s, p in enumerate(rng.integers(0, 3, 40)):
        X.append(pages[p])
        clicks.append((rng.random(len(pages[p])) < 0.3).astype(float))
        qid += [s] * len(pages[p])
    X, clicks, qid = np.concatenate(X), np.concatenate(clicks), np.array(qid)
    module = _build_dla_module(_Linear(4), 5)
    with torch.no_grad():
        module.tower.logits.copy_(torch.tensor([0.0, -0.5, -1.0, -1.2, -2.0]))
    weights = np.repeat(rng.uniform(0.5, 2.0, 40), np.bincount(qid))
    for sw in (None, weights):
        train = check_ranking_input(X, clicks, qid, sample_weight=sw)
        merged = _merge_repeated_pages(train)
        assert merged.n_queries == 3 and merged.sample_weight is None
        per_session = train_loss_sum(module, _DLALoss(), train.X, train.y, train.offsets, train.sample_weight) / 40
        per_page = train_loss_sum(module, _DLALoss(), merged.X, merged.y, merged.offsets, None) / 3
        assert per_page == pytest.approx(per_session, rel=1e-5)
    distinct = check_ranking_input(np.concatenate(pages), np.zeros(13), np.repeat([0, 1, 2], [5, 3, 5]))
    assert _merge_repeated_pages(distinct) is distinct  # nothing to merge, no weights: the input itself


# ----------------------------------------------------------------------------- learning from a simulated log

@pytest.fixture(scope="module")
def sim():
    data = make_synthetic(80, n_features=10, list_length=(12, 20), seed=2)
    return simulate_clicks_protocol(data, n_sessions=15000, eta=1.0, top_k=8, production_fraction=0.1, random_state=0)


@pytest.fixture(scope="module")
def clicks(sim):
    return session_dataset(sim.log, sim.features)


def test_session_dataset_is_one_group_per_session_in_rank_order(sim, clicks):
    log = sim.log
    assert clicks.n_queries == log.n_sessions
    np.testing.assert_array_equal(clicks.query_offsets, log.session_offsets)
    np.testing.assert_array_equal(clicks.labels, log.clicked)


def test_dla_learns_decreasing_propensity(clicks):
    m = DLA(hidden=(8,), max_iter=5, random_state=0, verbose=False).fit(clicks)
    assert m.propensity_.dtype == np.float64 and m.propensity_.shape == (8,) and m.n_ranks_ == 8
    assert m.propensity_[0] == 1.0
    assert m.propensity_[-1] < 0.6
    s = m.predict(clicks.X)
    assert s.dtype == np.float64 and np.isfinite(s).all()


def _pbm_log(data, eta, n_sessions, *, depth=8, n_orders=4, seed=0):
    """A PBM click log with known θ_k = (1/k)^η: each query shows ``depth`` of its documents in one of
    ``n_orders`` random orders (a randomised logger: the rank is independent of relevance, so the bias is
    identified); P(click) = θ_k ρ(y), ρ(y) = 0.1 + 0.9 (2^y - 1)/(2^y_max - 1)."""
    rng = np.random.default_rng(seed)
    off = data.query_offsets
    pages = []
    for q in range(data.n_queries):
        rows = rng.choice(np.arange(off[q], off[q + 1]), depth, replace=False)
        pages += [(q, rng.permutation(rows)) for _ in range(n_orders)]
    rho = 0.1 + 0.9 * (2.0 ** data.labels - 1) / (2.0 ** data.labels.max() - 1)
    theta = (1.0 / np.arange(1, depth + 1)) ** eta
    pick = rng.integers(0, len(pages), n_sessions)
    docs = np.stack([pages[i][1] for i in pick])
    clicks = (rng.random(docs.shape) < theta * rho[docs]).astype(int)
    log = ClickLog.from_arrays([data.query_ids[pages[i][0]] for i in pick], list(docs), list(clicks))
    return log, theta


@pytest.mark.parametrize("eta, tol", [(1.0, 0.15), (2.0, 0.3)])
def test_propensities_recovered_on_a_pbm_log_with_known_eta(eta, tol):
    """θ_k/θ_1 = (1/k)^η recovered within ``tol`` relative error at every rank 2-8, from 30,000 sessions of
    120 queries. Measured on three seeds of this simulation (the largest error at ranks 2-8): the DLA on the
    shared loop 0.120 / 0.072 / 0.081 at η = 1 and 0.252 / 0.185 / 0.138 at η = 2; the former DLA (its own MLP
    and Adam loop, rankwise 0.1) 0.153 / 0.093 / 0.065 and 0.243 / 0.160 / 0.101 (seed 0 is the one run here)."""
    data = make_synthetic(120, n_features=10, list_length=(12, 20), seed=5)
    log, theta = _pbm_log(data, eta, 30000, seed=0)
    m = DLA(hidden=(16,), max_iter=30, random_state=0, verbose=False).fit(session_dataset(log, data))
    rel = np.abs(m.propensity_ / theta - 1)
    assert m.propensity_[0] == 1.0 and rel.max() < tol, (m.propensity_, theta)


# ----------------------------------------------------------------------------- the estimator contract

def _small(clicks, n=300):
    return clicks.take(np.arange(n))


def test_array_form_equals_the_data_set_form(clicks):
    ds = _small(clicks)
    qid = np.repeat(np.arange(ds.n_queries), np.diff(ds.query_offsets))
    a = DLA(hidden=(4,), max_iter=2, random_state=0, verbose=False).fit(ds)
    b = DLA(hidden=(4,), max_iter=2, random_state=0, verbose=False).fit(ds.X, ds.labels, qid=qid)
    np.testing.assert_array_equal(a.predict(ds.X), b.predict(ds.X, qid=qid))
    np.testing.assert_array_equal(a.propensity_, b.propensity_)


def test_clone_get_params_save_load_and_pickle(clicks, tmp_path):
    from rankwise.models import load

    m = DLA(hidden=(4,), max_iter=2, propensity_learning_rate=0.1, random_state=0, verbose=False)
    params = m.get_params()
    assert "loss" not in params and params["propensity_learning_rate"] == 0.1
    c = clone(m)
    assert c.get_params() == params
    m.fit(_small(clicks))
    assert m.get_params() == params
    m.save(tmp_path / "dla.npz")
    back = load(tmp_path / "dla.npz")
    assert type(back) is DLA and back.get_params() == params
    np.testing.assert_array_equal(back.propensity_, m.propensity_)
    np.testing.assert_array_equal(back.predict(clicks.X[:50]), m.predict(clicks.X[:50]))
    p = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(p.predict(clicks.X[:50]), m.predict(clicks.X[:50]))
    np.testing.assert_array_equal(p.propensity_, m.propensity_)
    m.set_params(max_iter=3, batch_pages=8)
    assert m.batch_queries == 8


def test_grid_search_with_group_kfold(clicks):
    import sklearn
    from sklearn.model_selection import GridSearchCV, GroupKFold

    ds = _small(clicks)
    qid = np.repeat(np.arange(ds.n_queries), np.diff(ds.query_offsets))
    with sklearn.config_context(enable_metadata_routing=True):
        est = DLA(hidden=(4,), max_iter=1, random_state=0, verbose=False)
        est.set_fit_request(qid=True).set_score_request(qid=True)
        search = GridSearchCV(est, {"propensity_learning_rate": [0.01, 0.1]}, cv=GroupKFold(2))
        search.fit(ds.X, ds.labels, qid=qid, groups=qid)
    assert search.best_params_["propensity_learning_rate"] in (0.01, 0.1)
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()


def test_early_stopping_on_held_out_sessions(clicks):
    train, val = clicks.take(np.arange(2000)), clicks.take(np.arange(2000, 3000))
    m = DLA(hidden=(4,), max_iter=6, early_stopping_rounds=1, random_state=0, verbose=False).fit(train, eval_set=val)
    assert 0 <= m.best_iteration_ < len(m.history_) <= 6
    assert m.best_score_ == pytest.approx(max(m.history_["ndcg@10"]), abs=1e-12)
    assert m.propensity_[0] == 1.0


def test_n_jobs_leaves_the_result_unchanged(clicks):
    ds = _small(clicks)
    a = DLA(hidden=(4,), max_iter=2, random_state=0, verbose=False, n_jobs=1).fit(ds)
    before = torch.get_num_threads()
    b = DLA(hidden=(4,), max_iter=2, random_state=0, verbose=False, n_jobs=2).fit(ds)
    assert torch.get_num_threads() == before
    np.testing.assert_allclose(a.propensity_, b.propensity_, rtol=1e-5)


def test_former_names_and_fit_form_still_work_with_a_warning(sim, clicks):
    with pytest.warns(DeprecationWarning, match="'epochs' is deprecated.*'max_iter'"):
        old = DLA(hidden=(8,), epochs=2, lr=1e-3, propensity_lr=0.05, batch_pages=16, random_state=0, verbose=False)
    assert (old.max_iter, old.learning_rate, old.propensity_learning_rate, old.batch_queries) == (2, 1e-3, 0.05, 16)
    with pytest.warns(DeprecationWarning, match=r"DLA.fit\(log, features\) is deprecated.*session_dataset"):
        old.fit(sim.log, sim.features)
    new = DLA(hidden=(8,), max_iter=2, batch_queries=16, random_state=0, verbose=False).fit(clicks)
    np.testing.assert_array_equal(old.propensity_, new.propensity_)
    with pytest.raises(TypeError, match="unexpected keyword argument 'epoch'"):
        DLA(epoch=3)


@pytest.mark.parametrize("param, value, message", [
    ("max_iter", 0, "DLA: max_iter must be"), ("batch_queries", 2.5, "DLA: batch_queries must be"),
    ("batch_pages", 2.5, "DLA: batch_queries must be"), ("learning_rate", 0.0, "DLA: learning_rate must be"),
    ("propensity_learning_rate", float("nan"), "DLA: propensity_learning_rate must be"),
    ("hidden", (0,), "hidden must hold positive widths")])
def test_parameters_are_checked(clicks, param, value, message):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # batch_pages: the former name of batch_queries
        model = DLA(**{param: value}, verbose=False)
    with pytest.raises(InputError, match=message):
        model.fit(_small(clicks, 50))


def test_bad_input_is_refused_clearly(clicks):
    ds = _small(clicks, 50)
    y = ds.labels.copy()
    y[7] = -1.0
    qid = np.repeat(np.arange(ds.n_queries), np.diff(ds.query_offsets))
    with pytest.raises(InputError, match=r"DLA: the labels are clicks .* non-negative; got -1 at row 7"):
        DLA(verbose=False).fit(ds.X, y, qid=qid)
    with pytest.raises(NotFittedError):
        DLA().predict(np.zeros((1, 2)))
    log = ClickLog.from_arrays(["q"], [["a", "b"]], [[1, 0]])
    feats = RankingDataset.from_arrays(np.eye(2, dtype=np.float32), np.zeros(2), ["q"] * 2, doc_ids=["a", "c"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(InputError, match=r"\(query 'q', doc 'b'\) of the log has no row in the feature data set"):
            DLA(verbose=False).fit(log, feats)


def test_checkpoint_and_resume_equal_an_uninterrupted_run(clicks, tmp_path):
    """The tower's logits and its optimiser state are part of the checkpoint: a resumed run ends where an
    uninterrupted one does."""
    ds = _small(clicks)
    whole = DLA(hidden=(4,), max_iter=4, random_state=0, verbose=False).fit(ds)
    DLA(hidden=(4,), max_iter=2, random_state=0, verbose=False).fit(ds, checkpoint=tmp_path / "ck.npz")
    resumed = DLA(hidden=(4,), max_iter=4, random_state=0, verbose=False).fit(ds, resume=tmp_path / "ck.npz")
    np.testing.assert_array_equal(resumed.propensity_, whole.propensity_)
    np.testing.assert_array_equal(resumed.predict(ds.X), whole.predict(ds.X))
    assert resumed.propensity_[0] == 1.0 and not np.allclose(resumed.propensity_, 1.0)
