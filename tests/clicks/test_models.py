"""Click models against brute-force enumeration (tests/reference/clicks_reference.py) and against
their own simulations (parameters recovered)."""
from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from rankwise.clicks import CCM, CLICK_MODELS, CM, DBN, DCM, DCTR, GCTR, PBM, RCTR, SDBN, UBM, ClickLog
from rankwise.errors import InputError, NotFittedError
from reference import clicks_reference as ref


def tiny_log():
    """Sessions of 3 documents over 2 queries, with every click pattern that matters."""
    q1 = ["a", "b", "c"]
    q1b = ["b", "a", "c"]
    q2 = ["x", "y", "z"]
    sessions = [
        ("q1", q1, [1, 0, 0]), ("q1", q1, [0, 1, 1]), ("q1", q1b, [0, 0, 0]), ("q1", q1b, [1, 1, 0]),
        ("q2", q2, [0, 0, 1]), ("q2", q2, [1, 0, 1]), ("q2", q2, [0, 0, 0]), ("q1", q1, [1, 1, 1]),
        ("q2", ["y", "x", "z"], [0, 1, 0]),
    ]
    return ClickLog.from_arrays([s[0] for s in sessions], [s[1] for s in sessions], [s[2] for s in sessions])


def sessions_of(log):
    off = log.session_offsets
    return [(log.pair[off[s]:off[s + 1]].tolist(), log.clicked[off[s]:off[s + 1]].tolist())
            for s in range(log.n_sessions)]


def ref_params(model, name):
    if name == "PBM":
        return {"alpha": model.alpha_, "gamma": model.gamma_}
    if name == "UBM":
        return {"alpha": model.alpha_, "gamma": model.gamma_}
    if name == "DBN":
        return {"alpha": model.alpha_, "sigma": model.sigma_, "gamma": model.gamma_}
    if name == "CCM":
        return {"alpha": model.alpha_, "tau": model.tau_}
    raise KeyError(name)


GENS = {"PBM": ref.gen_pbm, "UBM": ref.gen_ubm, "DBN": ref.gen_dbn, "CCM": ref.gen_ccm}


def ref_em(name, log, n_steps):
    """n EM steps by enumeration from the models' starting point (every parameter 1/2)."""
    n_pairs, R = log.n_pairs, log.max_rank
    P = {"alpha": np.full(n_pairs, 0.5)}
    if name == "PBM":
        P["gamma"] = np.full(R, 0.5)
    elif name == "UBM":
        P["gamma"] = np.full((R, R), 0.5)
    elif name == "DBN":
        P["sigma"], P["gamma"] = np.full(n_pairs, 0.5), 0.5
    else:
        P["tau"] = np.full(3, 0.5)
    sess = sessions_of(log)
    for _ in range(n_steps):
        acc = ref.em_step(GENS[name], P, sess)
        new = {"alpha": np.array([ref.ratio(acc, "a", p) for p in range(n_pairs)])}
        if name == "PBM":
            new["gamma"] = np.array([ref.ratio(acc, "g", r) for r in range(R)])
        elif name == "UBM":
            new["gamma"] = np.array([ref.ratio(acc, "g", k) for k in range(R * R)]).reshape(R, R)
        elif name == "DBN":
            new["sigma"] = np.array([ref.ratio(acc, "s", p) for p in range(n_pairs)])
            new["gamma"] = ref.ratio(acc, "gamma")
        else:
            new["tau"] = np.array([ref.ratio(acc, k) for k in ("t1", "t2", "t3")])
        P = new
    return P


@pytest.mark.parametrize("name", ["PBM", "UBM", "DBN", "CCM"])
@pytest.mark.parametrize("steps", [1, 3])
def test_em_update_matches_enumeration(name, steps):
    log = tiny_log()
    model = CLICK_MODELS[name](max_iter=steps, tol=0).fit(log)
    assert model.n_iter_ == steps
    expected = ref_em(name, log, steps)
    got = ref_params(model, name)
    for k in expected:
        if name == "UBM" and k == "gamma":
            # only the (r, r') cells with r' < r exist; the others never move from their prior
            R = log.max_rank
            mask = np.tril(np.ones((R, R), bool))
            np.testing.assert_allclose(got[k][mask], expected[k][mask], rtol=1e-10, err_msg=k)
        else:
            np.testing.assert_allclose(got[k], expected[k], rtol=1e-10, err_msg=k)


def test_closed_form_estimates_match_formulas():
    log = tiny_log()
    want = ref.mle_counts(sessions_of(log), log.n_pairs, log.max_rank)
    assert GCTR().fit(log).rho_ == pytest.approx(want["gctr"])
    np.testing.assert_allclose(RCTR().fit(log).rho_, want["rctr"])
    np.testing.assert_allclose(DCTR().fit(log).alpha_, want["dctr"])
    np.testing.assert_allclose(CM().fit(log).alpha_, want["cm"])
    dcm = DCM().fit(log)
    np.testing.assert_allclose(dcm.alpha_, want["dcm_alpha"])
    np.testing.assert_allclose(dcm.lambda_, want["dcm_lambda"])
    sdbn = SDBN().fit(log)
    np.testing.assert_allclose(sdbn.alpha_, want["sdbn_alpha"])
    np.testing.assert_allclose(sdbn.sigma_, want["sdbn_sigma"])


def _random_params(model, name, rng):
    """Overwrite a fitted model's parameters with random ones; return the enumeration generator."""
    n_pairs = len(model.pair_index_)
    R = model.max_rank_
    a = rng.uniform(0.1, 0.9, n_pairs)
    if name in ("GCTR", "RCTR", "DCTR", "PBM"):
        if name == "GCTR":
            model.rho_ = float(rng.uniform(0.1, 0.9))
            P = {"alpha": np.full(n_pairs, model.rho_), "gamma": np.ones(R)}
        elif name == "RCTR":
            model.rho_ = rng.uniform(0.1, 0.9, R)
            P = {"alpha": np.ones(n_pairs), "gamma": model.rho_}
        elif name == "DCTR":
            model.alpha_ = a
            P = {"alpha": a, "gamma": np.ones(R)}
        else:
            model.alpha_, model.gamma_ = a, rng.uniform(0.1, 0.9, R)
            P = {"alpha": a, "gamma": model.gamma_}
        return lambda pairs: ref.gen_pbm(P, pairs)
    if name == "UBM":
        model.alpha_, model.gamma_ = a, rng.uniform(0.1, 0.9, (R, R))
        P = {"alpha": a, "gamma": model.gamma_}
        return lambda pairs: ref.gen_ubm(P, pairs)
    if name in ("DBN", "SDBN", "CM"):
        s = rng.uniform(0.1, 0.9, n_pairs)
        g = float(rng.uniform(0.3, 0.95))
        if name == "CM":
            model.alpha_ = a
            s, g = np.ones(n_pairs), 1.0
        elif name == "SDBN":
            model.alpha_, model.sigma_ = a, s
            g = 1.0
        else:
            model.alpha_, model.sigma_, model.gamma_ = a, s, g
        P = {"alpha": a, "sigma": s, "gamma": g}
        return lambda pairs: ref.gen_dbn(P, pairs)
    if name == "CCM":
        model.alpha_, model.tau_ = a, rng.uniform(0.2, 0.9, 3)
        P = {"alpha": a, "tau": model.tau_}
        return lambda pairs: ref.gen_ccm(P, pairs)
    if name == "DCM":
        model.alpha_, model.lambda_ = a, rng.uniform(0.2, 0.9, R)
        return lambda pairs: ref.gen_cascade_chain(a[pairs], np.ones(len(pairs)), model.lambda_[:len(pairs)])
    raise KeyError(name)


@pytest.mark.parametrize("name", sorted(CLICK_MODELS))
def test_probabilities_loglik_perplexity_by_definition(name):
    rng = np.random.default_rng(7)
    log = tiny_log()
    model = CLICK_MODELS[name]().fit(log)
    gen = _random_params(model, name, rng)
    full = model.click_probabilities(log)
    cond = model.click_probabilities(log, conditional=True)
    off = log.session_offsets
    ll_ref, l2 = [], np.zeros(log.max_rank)
    for s, (pairs, clicks) in enumerate(sessions_of(log)):
        table, _ = ref.session_table(gen(pairs))
        pc, f, c = ref.probabilities(table, clicks)
        np.testing.assert_allclose(full[off[s]:off[s + 1]], f, rtol=1e-10, atol=1e-14)
        c = np.array(c)
        defined = np.isfinite(c)  # P(C_r | c_<r) is undefined after a prefix of probability 0 (CM)
        np.testing.assert_allclose(cond[off[s]:off[s + 1]][defined], c[defined], rtol=1e-10, atol=1e-14)
        ll_ref.append(math.log(max(pc, 1e-300)))
        for r, (q, cr) in enumerate(zip(f, clicks)):
            q = min(max(q, 1e-6), 1 - 1e-6)
            l2[r] += math.log2(q) if cr else math.log2(1 - q)
    ll = model.log_likelihood(log)
    if name != "CM":  # CM gives some of these sessions probability 0 (clamped in evaluation)
        assert float(ll) == pytest.approx(np.mean(ll_ref), rel=1e-10)
    assert ll.n_sessions == log.n_sessions and ll.n_dropped == 0
    overall, per_rank = model.perplexity(log)
    want = 2.0 ** (-l2 / log.n_sessions)
    np.testing.assert_allclose(per_rank, want, rtol=1e-10)
    assert overall == pytest.approx(want.mean(), rel=1e-12)


def test_held_out_protocol_drops_unknown_queries():
    log = tiny_log()
    train = log.subset(np.flatnonzero(log.queries[log.query] == "q1"))
    m = PBM().fit(train)
    ll = m.log_likelihood(log)
    assert ll.n_dropped == int((log.queries[log.query] == "q2").sum())
    assert ll.n_sessions + ll.n_dropped == log.n_sessions
    ppl = m.perplexity(log)
    assert ppl.n_dropped == ll.n_dropped
    with pytest.raises(InputError, match="none of the"):
        PBM().fit(train).log_likelihood(log.subset(np.flatnonzero(log.queries[log.query] == "q2")))


# -------------------------------------------------------------------------------- recovery
@functools.lru_cache(maxsize=None)
def permuted_log(n_sessions, n_queries=4, n_docs=6, seed=0):
    """Sessions showing a random permutation of the query's documents (every doc at every rank)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    q = rng.integers(0, n_queries, n_sessions)
    perm = np.argsort(rng.random((n_sessions, n_docs)), axis=1)
    frame = pd.DataFrame({"session": np.repeat(np.arange(n_sessions), n_docs), "query": np.repeat(q, n_docs),
                          "rank": np.tile(np.arange(1, n_docs + 1), n_sessions),
                          "doc": (np.repeat(q, n_docs) * 100 + perm.reshape(-1)), "clicked": 0})
    return ClickLog.from_frame(frame)


def truth_model(name, log, rng):
    m = CLICK_MODELS[name]().fit(log)
    n_pairs, R = log.n_pairs, log.max_rank
    m.alpha_ = rng.uniform(0.15, 0.85, n_pairs)
    if name == "PBM":
        m.gamma_ = 1.0 / np.arange(1, R + 1) ** 0.7
    elif name == "UBM":
        g = rng.uniform(0.3, 0.95, (R, R))
        m.gamma_ = np.tril(g)
    elif name == "DBN":
        m.sigma_, m.gamma_ = rng.uniform(0.2, 0.8, n_pairs), 0.8
    elif name == "CCM":
        m.tau_ = np.array([0.75, 0.4, 0.9])
    elif name == "SDBN":
        m.sigma_ = rng.uniform(0.2, 0.8, n_pairs)
    elif name == "DCM":
        m.lambda_ = np.linspace(0.8, 0.4, R)
    elif name == "RCTR":
        m.rho_ = rng.uniform(0.1, 0.5, R)
    elif name == "GCTR":
        m.rho_ = 0.3
    return m


RECOVER = {  # parameters compared, and the absolute tolerance
    "GCTR": (["rho_"], 0.02), "RCTR": (["rho_"], 0.03), "DCTR": (["alpha_"], 0.05),
    "PBM": (["alpha_", "gamma_"], 0.06), "UBM": (["alpha_", "gamma_"], 0.1), "CM": (["alpha_"], 0.08),
    "DBN": (["alpha_", "sigma_", "gamma_"], 0.08), "CCM": (["alpha_", "tau_"], 0.08),
}


@pytest.mark.parametrize("name", sorted(RECOVER))
def test_parameters_recovered_from_own_simulation(name):
    rng = np.random.default_rng(3)
    # DBN's satisfaction is seen only through last clicks: it needs more sessions for the same accuracy
    template = permuted_log(50000 if name == "DBN" else 20000, seed=1)
    truth = truth_model(name, template, rng)
    clicks = truth.sample(template, random_state=2)
    fitted = CLICK_MODELS[name](max_iter=200, tol=1e-7).fit(clicks)
    # the fitted pairs are in the same order (same sessions, same documents)
    assert list(fitted.pair_index_) == list(truth.pair_index_)
    attrs, tol = RECOVER[name]
    for a in attrs:
        got, want = np.asarray(getattr(fitted, a), float), np.asarray(getattr(truth, a), float)
        if name in ("PBM", "UBM"):
            # PBM and UBM identify α γ only up to a common scale: compare γ / γ_1 and α γ_1
            g1f, g1t = np.ravel(fitted.gamma_)[0], np.ravel(truth.gamma_)[0]
            if a == "gamma_":
                mask = np.tril(np.ones_like(got, bool)) if got.ndim == 2 else np.ones_like(got, bool)
                got, want = got[mask] / g1f, want[mask] / g1t
            else:
                got, want = got * g1f, want * g1t
        err = np.max(np.abs(got - want))
        assert err < tol, f"{name}.{a}: max abs error {err:.3f} >= {tol}"


def test_sdbn_dcm_recover_when_their_estimator_assumption_holds():
    """The book's closed forms for SDBN and DCM assume the ranks below the last click were not
    examined; with σ = 1 (SDBN) or λ = 0 after the last click they are exact MLEs."""
    rng = np.random.default_rng(5)
    template = permuted_log(20000, seed=4)
    truth = truth_model("SDBN", template, rng)
    truth.sigma_ = np.ones(template.n_pairs)
    fitted = SDBN().fit(truth.sample(template, random_state=1))
    assert np.max(np.abs(fitted.alpha_ - truth.alpha_)) < 0.06
    truth = truth_model("DCM", template, rng)
    truth.lambda_ = np.zeros(template.max_rank)
    fitted = DCM().fit(truth.sample(template, random_state=1))
    assert np.max(np.abs(fitted.alpha_ - truth.alpha_)) < 0.06


def test_errors():
    log = tiny_log()
    with pytest.raises(NotFittedError):
        PBM().perplexity(log)
    with pytest.raises(InputError, match="ClickLog"):
        PBM().fit([1, 2])
    with pytest.raises(InputError, match="max_iter"):
        PBM(max_iter=0).fit(log)
    with pytest.raises(InputError, match="gamma"):
        DBN(gamma=1.5).fit(log)
    with pytest.raises(InputError, match="no per-document"):
        GCTR().fit(log).relevance()
    longer = ClickLog.from_arrays(["q1"], [["a", "b", "c", "d"]], [[0, 0, 0, 1]])
    with pytest.raises(InputError, match="rank parameters"):
        PBM().fit(log).click_probabilities(longer)


def test_relevance_table():
    log = tiny_log()
    rel = DBN().fit(log).relevance()
    assert list(rel.columns) == ["query", "doc", "relevance"] and len(rel) == log.n_pairs
    assert ((rel.relevance > 0) & (rel.relevance < 1)).all()
