"""Resume equals no interruption (issue 29 item 3): every trainer with checkpoints, killed and resumed.

A fit killed right after a complete checkpoint write (at the first, a middle and the last-but-one
write, and a resumed fit killed again) and resumed from that checkpoint gives the scores of the
uninterrupted fit, bit for bit, in one and two threads; a child killed by SIGKILL at random moments
too. Before L-BFGS checkpoints carried L-BFGS-B's state, a resumed L-BFGS fit restarted its
curvature memory and differed (max |Δscore| 0.011–0.072 in issue 29's trials).
The >= 30-kill-point run is benchmarks/faults_resume.py.
"""
from __future__ import annotations

import random

import re

import numpy as np
import pytest

import _resume_faults as h
from rankwise.errors import InputError


@pytest.fixture(scope="module")
def uninterrupted():
    """(name, n_jobs) -> the uninterrupted scores, the bytes of each checkpoint a checkpointed fit writes, the
    warnings that fit gave (h.checkpointed), computed once per module and worker."""
    cache = {}

    def get(name, n_jobs):
        if (name, n_jobs) not in cache:
            cache[name, n_jobs] = h.checkpointed(name, n_jobs)
        return cache[name, n_jobs]
    return get


@pytest.mark.parametrize("n_jobs", [1, 2])
@pytest.mark.parametrize("name", list(h.TRAINERS))
def test_killed_and_resumed_equals_uninterrupted(tmp_path, uninterrupted, name, n_jobs):
    full, copies, _ = uninterrupted(name, n_jobs)
    writes = len(copies)
    assert writes >= 4  # the fit is long enough to be killed in its middle
    for i, plan in enumerate([[1, writes // 2], [writes - 1]]):  # killed twice (resumed in between); late
        left = []
        scores = h.killed_and_resumed(name, plan, tmp_path / f"ck{i}.npz", n_jobs, left=left)
        np.testing.assert_array_equal(scores, full, err_msg=f"{name}, n_jobs={n_jobs}, killed after writes {plan}")
        # what the first kill left is the uninterrupted fit's checkpoint of that write, byte for byte: the
        # every-kill-point tests below resume from those copies
        assert left[0] == copies[plan[0] - 1], f"{name}, n_jobs={n_jobs}: killed after write {plan[0]}"


@pytest.mark.parametrize("name", ["linear lbfgs (listnet)", "linear lbfgs + l1 (bounded)"])
def test_every_lbfgs_kill_point_resumes_to_the_same_model(tmp_path, uninterrupted, name):
    """Resumed from each checkpoint the uninterrupted fit writes: what a fit killed after that write leaves
    (test_killed_and_resumed_equals_uninterrupted checks the bytes; the final one differs in fit_time_ only)."""
    full, copies, _ = uninterrupted(name, 1)
    writes = len(copies)
    for k in range(1, writes + 1):
        np.testing.assert_array_equal(h.resumed_from(name, copies[k - 1], tmp_path / f"ck{k}.npz"), full,
                                      err_msg=f"killed after checkpoint {k} of {writes}")


@pytest.mark.slow
def test_sigkill_at_random_moments_then_resume(tmp_path, uninterrupted):
    name = "linear lbfgs (listnet)"
    full = uninterrupted(name, 1)[0]
    rng = random.Random(29)
    for i in range(3):
        scores, _ = h.sigkill_and_resume(name, tmp_path / f"ck{i}.npz", rng.uniform(0.0, 0.3))
        np.testing.assert_array_equal(scores, full)


def test_a_finished_lbfgs_run_resumes_to_itself(tmp_path):
    """The final checkpoint of a converged run, or one stopped early, continues nowhere: the same model."""
    from rankwise.models import LinearRanker

    (X, y, qid), val = h.data()
    for kw in ({"max_iter": 500}, {"max_iter": 500, "early_stopping_rounds": 2}):
        ck = tmp_path / "ck.npz"
        fit_kw = {"eval_set": val} if "early_stopping_rounds" in kw else {}
        done = LinearRanker("listnet", alpha=1e-2, verbose=False, **kw).fit(X, y, qid=qid, checkpoint=ck, **fit_kw)
        again = LinearRanker("listnet", alpha=1e-2, verbose=False, **kw).fit(X, y, qid=qid, resume=ck, **fit_kw)
        np.testing.assert_array_equal(again.predict(X), done.predict(X))
        assert again.n_iter_ == done.n_iter_ and again.history_ == done.history_


def test_a_checkpoint_whose_lbfgs_state_disagrees_with_its_history_is_refused(tmp_path):
    from rankwise.models import LinearRanker, persistence

    (X, y, qid), _ = h.data()
    ck = tmp_path / "ck.npz"
    m = LinearRanker("listnet", max_iter=30, verbose=False).fit(X, y, qid=qid, checkpoint=ck)
    assert m.n_iter_ > 3
    _, _, tstate, tarrays = persistence.load_checkpoint(ck, m)
    tarrays["lbfgs/counts"] = np.array([7, 9, 0])
    persistence.save_checkpoint(m, ck, tstate, tarrays)
    with pytest.raises(InputError, match=r"corrupt or not a LinearRanker checkpoint .*iteration counter \[7, 9, 0\] "
                                         rf"vs {m.n_iter_} recorded"):
        LinearRanker("listnet", max_iter=40, verbose=False).fit(X, y, qid=qid, resume=ck)


def test_a_checkpoint_without_lbfgs_state_restarts_from_its_coefficients(tmp_path):
    """A checkpoint written before L-BFGS state was saved still resumes (the restart rule: L-BFGS
    starts afresh at the saved coefficients and reaches the same optimum, not the same iterates)."""
    from rankwise.models import LinearRanker, persistence

    (X, y, qid), _ = h.data()
    kw = dict(loss="listnet", alpha=1e-2, tol=1e-12, verbose=False)
    full = LinearRanker(max_iter=300, **kw).fit(X, y, qid=qid)
    ck = tmp_path / "ck.npz"
    with pytest.warns(UserWarning, match="reached max_iter=4"):
        part = LinearRanker(max_iter=4, **kw).fit(X, y, qid=qid, checkpoint=ck)
    _, _, tstate, tarrays = persistence.load_checkpoint(ck, part)
    persistence.save_checkpoint(part, ck, tstate, {k: v for k, v in tarrays.items() if not k.startswith("lbfgs/")})
    resumed = LinearRanker(max_iter=300, **kw).fit(X, y, qid=qid, resume=ck)
    np.testing.assert_allclose(resumed.coef_, full.coef_, atol=1e-5)


@pytest.mark.parametrize("n_jobs", [1, 2])
@pytest.mark.parametrize("name", list(h.SUBSAMPLED) + list(h.LIBRARY_SAMPLED))
def test_every_subsampled_gbdt_kill_point_resumes_to_the_same_model(tmp_path, uninterrupted, name, n_jobs):
    """Row subsampling drawn by rankwise from (seed, round), the libraries' own generators reseeded from
    (seed, round) every round (LightGBM's bagging, column samplers, rank_xendcg's and extra_trees'
    draws; XGBoost's global generator with a new updater each round), under rankwise losses, native
    objectives and sampling parameters in backend_params: a fit killed after any round k and resumed
    draws what the uninterrupted fit drew. Before, the backend's generators restarted with the resumed
    booster, the later trees differed (max |Δscore| 0.7-0.9, benchmarks/results/faults_resume.md) and
    the resume warned (a warning fails this test). The fit killed after round k is the uninterrupted
    checkpointed fit up to its k-th write, whose bytes it leaves (checked by
    test_killed_and_resumed_equals_uninterrupted): each resume starts from that write's copy."""
    full, copies, warned = uninterrupted(name, n_jobs)
    writes = len(copies)
    assert writes == 12
    assert warned == [], f"{name}, n_jobs={n_jobs}: the fit with checkpoints warned"  # the killed fits' rounds
    import warnings

    for k in range(1, writes):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an exact resume has nothing to warn about
            scores = h.resumed_from(name, copies[k - 1], tmp_path / f"ck{k}.npz", n_jobs)
        np.testing.assert_allclose(scores, full, rtol=0, atol=1e-12,
                                   err_msg=f"{name}, n_jobs={n_jobs}: killed after round {k} of {writes}")


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_subsampled_gbdt_without_random_state_resumes_with_the_checkpoints_seed(tmp_path, backend):
    from rankwise.models import GBDTRanker

    (X, y, qid), _ = h.data()
    kw = dict(backend=backend, num_leaves=7, min_child_samples=5, subsample=0.7, verbose=False)
    ck = tmp_path / "ck.npz"
    with h.kill_after_writes(6):
        with pytest.raises(h.Killed):
            GBDTRanker("lambdarank", n_estimators=12, **kw).fit(X, y, qid=qid, checkpoint=ck, checkpoint_every=1)
    from rankwise.models import persistence

    seed = persistence.load_checkpoint(ck, GBDTRanker("lambdarank", n_estimators=12, **kw))[2]["seed"]
    resumed = GBDTRanker("lambdarank", n_estimators=12, **kw).fit(X, y, qid=qid, resume=ck)
    full = GBDTRanker("lambdarank", n_estimators=12, random_state=seed, **kw).fit(X, y, qid=qid)
    np.testing.assert_array_equal(resumed.predict(X), full.predict(X))


def test_the_row_subsample_is_a_function_of_seed_and_round():
    from rankwise.models.gbdt import _bag_rows

    a = _bag_rows(3, 5, 200_000, 0.8)
    np.testing.assert_array_equal(a, _bag_rows(3, 5, 200_000, 0.8))
    assert abs(a.mean() - 0.8) < 0.005  # each row kept with probability 0.8 (sd 0.0009)
    others = [_bag_rows(3, 6, 200_000, 0.8), _bag_rows(4, 5, 200_000, 0.8)]
    for b in others:  # another round or seed: an independent draw (agreement 0.8^2 + 0.2^2 = 0.68)
        assert abs(np.mean(a == b) - 0.68) < 0.005
    np.testing.assert_array_equal(_bag_rows(3, 5, 1000, 0.8), a[:1000])  # the first rows do not depend on n


@pytest.mark.parametrize("backend, loss, kw, drawn", [
    ("lightgbm", "native:lambdarank", {"backend_params": {"data_sample_strategy": "goss", "learning_rate": 0.5}},
     "data_sample_strategy='goss'"),
    ("lightgbm", "lambdarank", {"backend_params": {"boosting": "dart"}}, "boosting='dart'"),
    ("xgboost", "native:rank:ndcg", {"subsample": 0.6, "backend_params": {"updater": "grow_quantile_histmaker"}},
     "subsample=0.6"),
])
def test_gbdt_resume_with_draws_that_cannot_restart_is_refused_unless_asked(tmp_path, backend, loss, kw, drawn):
    """What a resumed booster cannot repeat (LightGBM's GOSS, which samples only after a booster's first
    1 / learning_rate rounds, counted again from 0 by a resumed one; DART, whose drops depend on the
    booster's history; XGBoost sampling under an updater of the caller's, which rankwise cannot renew
    every round) is refused with the reason; asked for with resume_inexact=True, it goes on and warns (measured:
    the later trees differ)."""
    from rankwise.models import GBDTRanker

    (X, y, qid), _ = h.data(large=True)
    params = dict(backend=backend, n_estimators=12, num_leaves=7, min_child_samples=5, random_state=3,
                  verbose=False, **kw)
    full = GBDTRanker(loss, **params).fit(X, y, qid=qid).predict(X)
    ck = tmp_path / "ck.npz"
    with h.kill_after_writes(5):
        with pytest.raises(h.Killed):
            GBDTRanker(loss, **params).fit(X, y, qid=qid, checkpoint=ck, checkpoint_every=1)
    says = rf"with {re.escape(drawn)}: {backend} draws at random from a state that restarts with the resumed " \
           r"booster, so rounds 5\.\.11 differ"
    with pytest.raises(InputError, match=says + r".*pass resume_inexact=True"):
        GBDTRanker(loss, **params).fit(X, y, qid=qid, resume=ck)
    with pytest.warns(UserWarning, match=says):
        resumed = GBDTRanker(loss, **params).fit(X, y, qid=qid, resume=ck, resume_inexact=True).predict(X)
    assert not np.array_equal(resumed, full), loss  # what the refusal says (if this fails, drop the refusal)


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_gbdt_resume_with_sampling_aliases_is_exact_and_silent(tmp_path, backend):
    """LightGBM's aliases of its sampling parameters (``subsample``, ``subsample_freq``, ``sub_feature``,
    ``colsample_bynode``) in backend_params are reseeded as the names they stand for; a plain resume is
    silent too."""
    import warnings

    from rankwise.models import GBDTRanker

    (X, y, qid), _ = h.data(large=True)
    bp = ({"subsample": 0.7, "subsample_freq": 1, "sub_feature": 0.7, "colsample_bynode": 0.7}
          if backend == "lightgbm" else {"subsample": 0.7, "colsample_bynode": 0.7})
    params = dict(backend=backend, n_estimators=10, num_leaves=7, min_child_samples=5, random_state=4,
                  verbose=False, backend_params=bp)
    for loss in ("lambdarank", "native:lambdarank" if backend == "lightgbm" else "native:rank:ndcg"):
        full = GBDTRanker(loss, **params).fit(X, y, qid=qid).predict(X)
        ck = tmp_path / "ck.npz"
        with h.kill_after_writes(4):
            with pytest.raises(h.Killed):
                GBDTRanker(loss, **params).fit(X, y, qid=qid, checkpoint=ck, checkpoint_every=1)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            resumed = GBDTRanker(loss, **params).fit(X, y, qid=qid, resume=ck).predict(X)
        np.testing.assert_array_equal(resumed, full, err_msg=loss)
    ck = tmp_path / "plain.npz"
    GBDTRanker("listnet", backend=backend, n_estimators=3, verbose=False).fit(X, y, qid=qid, checkpoint=ck)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GBDTRanker("listnet", backend=backend, n_estimators=5, verbose=False).fit(X, y, qid=qid, resume=ck)


@pytest.mark.parametrize("fraction", [0.5, 0.75, 0.8, 0.6, 0.1, 1 / 3, 0.999, 0.5 + 2 ** -53, 1 - 2 ** -15,
                                      2 ** -15, 0.6000000000000001, 0.123456789])
@pytest.mark.parametrize("n_rows", [1, 10, 1000, 1001, 123_457])
@pytest.mark.parametrize("freq", [1, 3])
def test_the_twin_bagging_fraction_draws_the_same_rows(fraction, n_rows, freq):
    """LightGBM keeps a row when its uniform draw k / 32768 (k = 0 .. 32767, float32) is below
    bagging_fraction, and from the bag size int(fraction * rows) chooses whether to bag into a copied
    subset: the twin fraction that forces LightGBM to re-create its bagging generators agrees on every
    k (brute force) and on that choice (and on the bag size itself unless no value can)."""
    from rankwise.models.gbdt import _lgb_uses_subset, _twin_fraction

    twin = _twin_fraction(fraction, n_rows, freq)
    assert twin != fraction
    u = np.arange(32768, dtype=np.float32) / np.float32(32768.0)
    np.testing.assert_array_equal(u.astype(np.float64) < fraction, u.astype(np.float64) < twin)
    assert _lgb_uses_subset(twin, n_rows, freq) == _lgb_uses_subset(fraction, n_rows, freq)
    exact_k = fraction * 32768 == int(fraction * 32768)
    if not (exact_k and fraction * n_rows == int(fraction * n_rows)):
        assert int(twin * n_rows) == int(fraction * n_rows)


def test_lbfgs_state_from_another_scipy_restarts_with_a_warning(tmp_path):
    """L-BFGS-B's workspace layout is scipy's: a state written by another scipy version is not trusted."""
    from rankwise.models import LinearRanker, persistence

    (X, y, qid), _ = h.data()
    ck = tmp_path / "ck.npz"
    m = LinearRanker("listnet", max_iter=30, verbose=False).fit(X, y, qid=qid, checkpoint=ck)
    _, _, tstate, tarrays = persistence.load_checkpoint(ck, m)
    assert "lbfgs/wa" in tarrays
    persistence.save_checkpoint(m, ck, {**tstate, "scipy": "1.15.0rc9"}, tarrays)
    with pytest.warns(UserWarning, match=r"written by scipy 1\.15\.0rc9, this is scipy .*: L-BFGS restarts"):
        LinearRanker("listnet", max_iter=40, verbose=False).fit(X, y, qid=qid, resume=ck)


@pytest.mark.parametrize("fraction, n_features", [(0.5, 6), (0.33, 20), (0.7, 10), (0.1, 7), (0.9, 3)])
def test_xgboost_trees_split_only_on_the_columns_of_their_round(fraction, n_features):
    """XGBoost's column sample of round r is the subset :func:`_xgb_columns` draws from (seed, r): every tree
    splits only on its round's columns, and the subset has XGBoost's size for the fraction (a smaller one
    would let XGBoost add zero-weight columns, a larger one leave the choice to its generator)."""
    from rankwise.models import GBDTRanker
    from rankwise.models.gbdt import _xgb_columns

    rng = np.random.default_rng(5)
    X = rng.normal(size=(600, n_features)) * np.logspace(-3, 3, n_features)
    qid = np.repeat(np.arange(60), 10)
    y = np.clip(np.round(X @ rng.normal(size=n_features) / 300 + rng.normal(size=600)), 0, 4)
    for loss in ("lambdarank", "native:rank:ndcg"):
        m = GBDTRanker(loss, backend="xgboost", n_estimators=15, colsample_bytree=fraction, random_state=9,
                       min_child_samples=1, verbose=False).fit(X, y, qid=qid)
        trees = m.booster_.get_dump(dump_format="json")
        used_any = 0
        for r, t in enumerate(trees):
            allowed = set(np.flatnonzero(_xgb_columns(9, r, n_features, fraction)).tolist())
            split = {int(f) for f in re.findall(r'"split": "f(\d+)"', t)}
            used_any += bool(split)
            assert split <= allowed, (loss, r, split, allowed)
        assert used_any > 5


def test_xgboost_column_subsets_are_a_function_of_seed_and_round():
    from rankwise.models.gbdt import _xgb_columns

    a = [_xgb_columns(3, r, 40, 0.25) for r in range(200)]
    assert all(w.sum() == 10 for w in a)
    np.testing.assert_array_equal(a[7], _xgb_columns(3, 7, 40, 0.25))
    assert not np.array_equal(a[7], _xgb_columns(4, 7, 40, 0.25))
    counts = np.sum(a, axis=0)  # each column in a quarter of the rounds: 50 ± 6.1 (binomial sd)
    assert counts.min() > 25 and counts.max() < 75
