"""The propensity-estimation contract: every estimator of PROPENSITY_ESTIMATORS (and PBM/UBM) fits a log,
gives propensity_ over ranks 1..R relative to rank 1, declares and checks its parameters, clones, prints
its non-default parameters and round-trips through save/load; the deprecated functions equal the classes;
intervention harvesting with two logging rankers; the identifiability diagnostic."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone

from rankwise.clicks import (CLICK_MODELS, PBM, PROPENSITY_ESTIMATORS, UBM, ClickLog, InterventionHarvesting,
                             RandPair, RandTop, RegressionEM, identifiability)
from rankwise.clicks import propensity as old
from rankwise.data import RankingDataset
from rankwise.errors import InputError, NotFittedError
from rankwise.models import load

THETA = 1.0 / np.arange(1, 7) ** 0.8  # six ranks
NQ, R = 30, 6


def pbm_log(n_sessions, *, shuffle, rel, seed=0, swap=False, loggers=None):
    """Sessions of 6 documents per query with PBM clicks (THETA, relevance rel[q, d]). ``shuffle``: "all"
    (RandTop), None (one fixed ranking: the identity), "rankers" (``loggers`` fixed rankings per query, one
    drawn per session: sessions of the same query under different rankings)."""
    rng = np.random.default_rng(seed)
    q = rng.integers(0, NQ, n_sessions)
    order = np.tile(np.arange(R), (n_sessions, 1))
    pair_rank = np.zeros(n_sessions, dtype=np.int64)
    if shuffle == "all":
        order = np.argsort(rng.random((n_sessions, R)), axis=1)
    elif shuffle == "rankers":
        perms = np.array([[np.arange(R)] + [rng.permutation(R) for _ in range(loggers - 1)] for _ in range(NQ)])
        order = perms[q, rng.integers(0, loggers, n_sessions)]
    if swap:
        pair_rank = rng.integers(2, R + 1, n_sessions)
        s = np.flatnonzero(rng.random(n_sessions) < 0.5)
        k = pair_rank[s] - 1
        a = order[s, 0].copy()
        order[s, 0] = order[s, k]
        order[s, k] = a
    clicks = (rng.random((n_sessions, R)) < THETA * rel[q[:, None], order]).astype(np.uint8)
    return ClickLog(np.arange(0, n_sessions * R + 1, R), q, np.array([f"q{x}" for x in range(NQ)]),
                    order.reshape(-1), np.array([f"d{d}" for d in range(R)]), clicks.reshape(-1), None,
                    {"pair_rank": pair_rank})


@pytest.fixture(scope="module")
def rel():
    return np.random.default_rng(1).uniform(0.05, 0.95, (NQ, R))


@pytest.fixture(scope="module")
def features(rel):
    """Every (query, doc) of the logs: its relevance and a noise feature, doc ids d0..d5 in each query."""
    noise = np.random.default_rng(2).normal(size=(NQ * R, 1))
    X = np.column_stack([rel.reshape(-1), noise])
    return RankingDataset(X, np.zeros(NQ * R), np.arange(0, NQ * R + 1, R),
                          query_ids=np.array([f"q{x}" for x in range(NQ)]),
                          doc_ids=np.tile(np.array([f"d{d}" for d in range(R)]), NQ))


@pytest.fixture(scope="module")
def logs(rel):
    return {"RandTop": pbm_log(20000, shuffle="all", rel=rel),
            "RandPair": pbm_log(30000, shuffle=None, rel=rel, swap=True),
            "RegressionEM": pbm_log(20000, shuffle="rankers", rel=rel, loggers=2, seed=3),
            "InterventionHarvesting": pbm_log(30000, shuffle="rankers", rel=rel, loggers=2, seed=4)}


#: small settings that keep the contract tests fast
FAST = {"RegressionEM": {"max_iter": 3, "n_estimators": 5}}


def _fitted(name, logs, features):
    return PROPENSITY_ESTIMATORS[name](**FAST.get(name, {})).fit(logs[name], features=features)


def test_the_registry_holds_the_four_estimators():
    assert set(PROPENSITY_ESTIMATORS) == {"RandTop", "RandPair", "RegressionEM", "InterventionHarvesting"}


def test_load_knows_where_every_saveable_click_class_lives():
    """rankwise.models.load imports the module of a class the models layer does not define from the root's table:
    it must name every propensity estimator, click model and click ranker, at the module that defines it."""
    import rankwise
    from rankwise.clicks import DLA, UnbiasedLambdaMART

    classes = {**PROPENSITY_ESTIMATORS, **CLICK_MODELS, "DLA": DLA, "UnbiasedLambdaMART": UnbiasedLambdaMART}
    assert set(rankwise.SAVED_ELSEWHERE) == set(classes)
    for name, cls in classes.items():
        assert rankwise.SAVED_ELSEWHERE[name] == cls.__module__


@pytest.mark.parametrize("name", sorted(PROPENSITY_ESTIMATORS))
def test_contract(name, logs, features, tmp_path):
    cls = PROPENSITY_ESTIMATORS[name]
    est = cls(**FAST.get(name, {}))
    with pytest.raises(NotFittedError):
        est.save(tmp_path / "unfitted.npz")
    assert est.fit(logs[name], features=features) is est
    p = est.propensity_
    assert isinstance(p, np.ndarray) and p.dtype == np.float64 and p.shape == (R,) and p[0] == 1.0
    assert np.all(np.isfinite(p)) and np.all(p > 0)
    assert 0.0 <= est.identifiability_ <= 1.0 and est.max_rank_ == R
    # parameters: declared, checked at fit, cloned, printed when not the default
    assert set(cls._parameter_constraints) <= set(est.get_params())
    twin = clone(est)
    assert type(twin) is cls and twin.get_params() == est.get_params() and not hasattr(twin, "propensity_")
    assert repr(cls()) == f"{name}()"
    # save / load through the models' persistence (no pickle), in this process and in a fresh one
    path = est.save(tmp_path / f"{name}.npz")
    back = load(path)
    assert type(back) is cls and back.get_params().keys() == est.get_params().keys()
    np.testing.assert_array_equal(back.propensity_, p)
    code = ("import sys, numpy as np; from rankwise.models import load; m = load(sys.argv[1]); "
            "print(type(m).__name__, np.array2string(m.propensity_, precision=17))")
    src = str(Path(__file__).resolve().parents[2] / "src")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                         env={"PYTHONPATH": src, "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}, check=True)
    assert out.stdout.split()[0] == name  # rankwise.models.load finds the class without rankwise.clicks imported


@pytest.mark.parametrize("name, param, value", [
    ("RandTop", "n", 0), ("RandPair", "pivot", 0), ("RandPair", "pair_rank", 3),
    ("RegressionEM", "max_iter", 0), ("RegressionEM", "m_step", "exact"), ("RegressionEM", "cross_fit", -1),
    ("RegressionEM", "n_jobs", 0), ("InterventionHarvesting", "min_set_size", 0),
    ("InterventionHarvesting", "max_iter", 1.5)])
def test_parameter_errors_name_the_parameter(name, param, value, logs, features):
    est = PROPENSITY_ESTIMATORS[name](**{param: value})
    assert repr(est) == f"{name}({param}={value!r})"
    with pytest.raises(InputError, match=rf"^{name}: {param} must be .*; got {value!r}$"):
        est.fit(logs[name], features=features)


def test_regression_em_n_iter_is_deprecated_for_max_iter():
    with pytest.warns(DeprecationWarning, match="'n_iter' is deprecated.*'max_iter'"):
        est = RegressionEM(n_iter=7)
    assert est.max_iter == 7 and "n_iter" not in est.get_params()
    with pytest.warns(DeprecationWarning):
        est.set_params(n_iter=4)
    assert est.max_iter == 4 and clone(est).max_iter == 4


def test_regression_em_takes_a_configured_estimator(logs, features, tmp_path):
    from rankwise.models import GBDTRanker

    model = GBDTRanker("sigmoid_ce", n_estimators=5, num_leaves=7, random_state=0, loss_every=None, verbose=False)
    est = RegressionEM(model, max_iter=2, n_jobs=1).fit(logs["RegressionEM"], features=features)
    fitted = est.relevance_model_
    assert isinstance(fitted, GBDTRanker) and fitted is not model and fitted.n_jobs == 1
    assert fitted.n_estimators_ == 5 and not hasattr(model, "booster_")  # the given estimator is cloned
    assert "GBDTRanker" in repr(est)
    back = load(est.save(tmp_path / "em.npz"))
    assert isinstance(back.estimator, GBDTRanker) and back.estimator.get_params() == model.get_params()
    X = features.X[:10]
    np.testing.assert_allclose(back.relevance_model_.predict(X), fitted.predict(X), rtol=1e-12)
    with pytest.raises(InputError, match="n_estimators set the default estimator"):
        RegressionEM(model, n_estimators=9).fit(logs["RegressionEM"], features=features)
    with pytest.raises(InputError, match="take none"):
        RegressionEM(model, warm_start=True).fit(logs["RegressionEM"], features=features)
    with pytest.raises(InputError, match="needs features="):
        RegressionEM().fit(logs["RegressionEM"])


# ------------------------------------------------------------------ the deprecated functions are the classes
def test_deprecated_functions_equal_the_classes(logs, features, rel):
    cases = [
        (lambda: old.propensities_randtop(logs["RandTop"], 4), lambda: RandTop(4).fit(logs["RandTop"]).propensity_,
         "RandTop"),
        (lambda: old.propensities_randpair(logs["RandPair"]),
         lambda: RandPair().fit(logs["RandPair"]).propensity_, "RandPair"),
        (lambda: old.harvest_propensities(logs["InterventionHarvesting"]).propensity,
         lambda: InterventionHarvesting().fit(logs["InterventionHarvesting"]).propensity_, "InterventionHarvesting"),
        (lambda: old.regression_em_log(logs["RegressionEM"], features, n_iter=2, n_estimators=5).propensity,
         lambda: RegressionEM(max_iter=2, n_estimators=5).fit(logs["RegressionEM"], features=features).propensity_,
         "RegressionEM"),
        (lambda: old.pbm_propensities(PBM(max_iter=5).fit(logs["RandTop"])),
         lambda: PBM(max_iter=5).fit(logs["RandTop"]).propensity_, "PBM"),
    ]
    for fn, cls, replacement in cases:
        with pytest.warns(DeprecationWarning, match=replacement):
            got = fn()
        np.testing.assert_array_equal(got, cls())


def test_randtop_and_randpair_by_brute_force(logs):
    """The paper formulas, session by session: RandTop CTR_k/CTR_1; RandPair clicks at k over clicks at the
    pivot in the sessions that randomised k."""
    log = logs["RandTop"]
    clicks, shown = np.zeros(R), np.zeros(R)
    for s in range(log.n_sessions):
        page = log.clicked[log.session_offsets[s]:log.session_offsets[s + 1]]
        clicks[:len(page)] += page
        shown[:len(page)] += 1
    ctr = clicks / shown
    np.testing.assert_allclose(RandTop().fit(log).propensity_, ctr / ctr[0], rtol=1e-12)
    log = logs["RandPair"]
    num, den = np.zeros(R + 1), np.zeros(R + 1)
    for s, k in enumerate(log.session_data["pair_rank"]):
        page = log.clicked[log.session_offsets[s]:log.session_offsets[s + 1]]
        if k:
            num[k] += page[k - 1]
            den[k] += page[0]
    want = num[1:] / np.where(den[1:] > 0, den[1:], 1)
    want[0] = 1.0
    np.testing.assert_allclose(RandPair().fit(log).propensity_, want, rtol=1e-12)


def test_deprecated_harvest_equals_the_former_session_count_on_the_same_log(logs):
    """The class aggregates the log's (query, doc, rank) counts; the former function counted sessions: the
    harvested sets and click rates are the same numbers."""
    log = logs["InterventionHarvesting"]
    est = InterventionHarvesting().fit(log)
    imp = np.zeros((log.n_pairs, R))
    clk = np.zeros((log.n_pairs, R))
    np.add.at(imp, (log.pair, log.ranks - 1), 1)
    np.add.at(clk, (log.pair, log.ranks - 1), log.clicked)
    for (a, b), size, (ca, cb) in zip(est.pairs_ - 1, est.set_sizes_, est.ctr_):
        both = (imp[:, a] > 0) & (imp[:, b] > 0)
        assert size == both.sum()
        np.testing.assert_allclose([ca, cb], [(clk[both, a] / imp[both, a]).sum(), (clk[both, b] / imp[both, b]).sum()],
                                   rtol=1e-12)


def test_randtop_on_the_aggregated_log_equals_the_sessions(logs):
    log = logs["RandTop"]
    for n in (None, 4):
        np.testing.assert_allclose(RandTop(n).fit(log.counts()).propensity_, RandTop(n).fit(log).propensity_,
                                   rtol=1e-12)
    with pytest.raises(InputError, match="n must be in"):
        RandTop(7).fit(log.counts())


def test_randpair_refuses_unrandomised_ranks_the_old_function_left_nan(rel):
    log = pbm_log(4000, shuffle=None, rel=rel, swap=True)
    log.session_data["pair_rank"] = np.where(log.session_data["pair_rank"] == 6, 0, log.session_data["pair_rank"])
    with pytest.warns(DeprecationWarning):
        ratio = old.propensities_randpair(log)
    assert np.isnan(ratio[5]) and np.all(np.isfinite(ratio[:5]))
    with pytest.raises(InputError, match=r"ranks \[6\] were never randomised"):
        RandPair().fit(log)
    np.testing.assert_array_equal(RandPair(max_rank=5).fit(log).propensity_, ratio[:5])


# ----------------------------------------------------------------------------------- click models
@pytest.mark.parametrize("name", sorted(CLICK_MODELS))
def test_click_models_clone_and_print_their_class(name):
    cls = CLICK_MODELS[name]
    m = cls(max_iter=7)
    assert repr(cls()) == f"{name}()" and repr(m) == f"{name}(max_iter=7)"
    twin = clone(m)
    assert type(twin) is cls and twin.get_params() == m.get_params()
    assert m.set_params(tol=0.5) is m and m.tol == 0.5
    with pytest.raises(InputError, match=rf"^{name}: max_iter must be an integer >= 1; got 0$"):
        cls(max_iter=0).fit(pbm_log(50, shuffle=None, rel=np.full((NQ, R), 0.5)))


@pytest.mark.parametrize("name", sorted(CLICK_MODELS))
@pytest.mark.parametrize("ids", ["text", "numbers"])
def test_click_models_save_and_load(name, ids, rel, tmp_path):
    """A loaded click model gives the same click probabilities, relevance and parameters; query and document ids
    keep their type (a numeric id loaded as text would match no pair of a new log)."""
    log = pbm_log(800, shuffle="all", rel=rel, seed=7)
    if ids == "numbers":
        log = ClickLog(log.session_offsets, log.query, np.arange(NQ) * 10, log.doc, np.arange(R) + 100,
                       log.clicked)
    m = CLICK_MODELS[name](max_iter=5).fit(log)
    back = load(m.save(tmp_path / "m.npz"))
    assert type(back) is type(m) and back.get_params() == m.get_params()
    for cond in (False, True):
        np.testing.assert_array_equal(back.click_probabilities(log, conditional=cond),
                                      m.click_probabilities(log, conditional=cond))
    if name not in ("GCTR", "RCTR"):
        assert back.relevance().equals(m.relevance())
    assert back.n_iter_ == m.n_iter_ and back.max_rank_ == m.max_rank_
    if name in ("PBM", "UBM"):
        np.testing.assert_array_equal(back.propensity_, m.propensity_)
    with pytest.raises(NotFittedError):
        CLICK_MODELS[name]().save(tmp_path / "unfitted.npz")


def test_dbn_gamma_is_a_parameter():
    from rankwise.clicks import DBN

    m = DBN(gamma=0.7)
    assert repr(m) == "DBN(gamma=0.7)" and clone(m).gamma == 0.7
    with pytest.raises(InputError, match="gamma must be"):
        DBN(gamma=1.5).fit(pbm_log(50, shuffle=None, rel=np.full((NQ, R), 0.5)))


def test_pbm_and_ubm_propensities(logs):
    """On PBM clicks (examination independent of earlier clicks) both recover θ/θ_1; UBM's is the
    examination after no click above."""
    log = logs["RandTop"]
    pbm = PBM(max_iter=100).fit(log)
    ubm = UBM(max_iter=100).fit(log)
    for m in (pbm, ubm):
        p = m.propensity_
        assert p.dtype == np.float64 and p.shape == (R,) and p[0] == 1.0
        np.testing.assert_allclose(p, THETA / THETA[0], rtol=0.08)
    np.testing.assert_allclose(ubm.propensity_, ubm.gamma_[:, 0] / ubm.gamma_[0, 0], rtol=0)
    with pytest.raises(NotFittedError):
        PBM().propensity_
    assert not hasattr(UBM(), "propensity_")


# ------------------------------------------------------------------ harvesting with two loggers; identifiability
def _brute_identifiability(log):
    ranks = {}
    for p, r in zip(log.pair, log.ranks):
        ranks.setdefault(int(p), set()).add(int(r))
    return sum(len(v) >= 2 for v in ranks.values()) / len(ranks)


def test_identifiability_by_brute_force(logs, rel):
    one = pbm_log(3000, shuffle=None, rel=rel)
    assert identifiability(one) == 0.0 == _brute_identifiability(one)
    for log in (logs["InterventionHarvesting"], logs["RandTop"], logs["RandPair"]):
        assert identifiability(log) == _brute_identifiability(log) > 0
        assert identifiability(log.counts()) == identifiability(log)
    # two loggers: a pair moves unless both rankings put it at the same rank
    two = logs["InterventionHarvesting"]
    assert 0.5 < identifiability(two) < 1.0
    assert identifiability(two, max_rank=1) == 0.0
    with pytest.raises(InputError, match="log must be"):
        identifiability(np.zeros(3))


def test_harvesting_with_two_logging_rankers(rel):
    """Two deterministic rankers (the identity and a permutation of every query), the sessions split
    between them: the sessions of one ranker alone identify nothing; together they do."""
    log = pbm_log(60000, shuffle="rankers", rel=rel, loggers=2, seed=5)
    est = InterventionHarvesting().fit(log)
    np.testing.assert_allclose(est.propensity_, THETA / THETA[0], rtol=0.1)
    assert est.identifiability_ == identifiability(log) > 0.5
    assert est.set_sizes_.sum() > 0 and est.n_iter_ >= 1
    # each logger's sessions alone: no (query, doc) moves
    first = np.array([np.array_equal(log.doc[s * R:(s + 1) * R], np.arange(R)) for s in range(log.n_sessions)])
    alone = log.subset(first)
    assert identifiability(alone) == 0.0
    with pytest.raises(InputError, match="nothing to harvest"):
        InterventionHarvesting().fit(alone)
    # an aggregated log gives the same estimate
    np.testing.assert_allclose(InterventionHarvesting().fit(log.counts()).propensity_, est.propensity_, rtol=1e-12)
