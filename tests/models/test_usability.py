"""Issue 16, items 1-10: the traps a new user falls into (each test failed before its fix).

Item 8's conformance checks are in ``test_sklearn_checks.py``; item 11 (recommendation) and the
``evaluate`` part of item 3 belong to other modules.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, GroupKFold

from _model_data import make_data
from rankwise.errors import InputError
from rankwise.models import GBDTRanker, LinearRanker, NeuralRanker, PairwiseReductionRanker, StructuredHingeRanker

ALL = {
    "linear": lambda: LinearRanker("listnet", max_iter=30, verbose=False),
    "neural": lambda: NeuralRanker("listnet", hidden=(8,), max_iter=2, random_state=0, verbose=False),
    "attention": lambda: NeuralRanker("listnet", architecture="attention", hidden=(8,), max_iter=1, random_state=0,
                                      verbose=False),
    "gbdt": lambda: GBDTRanker("listnet", n_estimators=3, min_child_samples=2, random_state=0, verbose=False),
    "reduction": lambda: PairwiseReductionRanker(random_state=0),
    "structured": lambda: StructuredHingeRanker(max_iter=2, random_state=0),
}


@pytest.fixture(params=list(ALL))
def model(request):
    return ALL[request.param]()


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


# ---------------------------------------------------------------------------------- item 1: raw feature scales

#: features 1e-5 to 1e8 apart, as raw MSLR features are (up to 1.6e8)
SCALES = np.array([1e-4, 1e-3, 1e8, 1e6, 1.0, 1e-5])


def _raw_scale_data():
    (X, y, q), (Xt, yt, qt) = make_data(n_queries=30, list_len=10), make_data(n_queries=40, list_len=10, seed=1)
    return (X * SCALES).astype(np.float32), y, q, (Xt * SCALES).astype(np.float32), yt, qt


def test_reduction_and_structured_handle_raw_feature_scales_as_linear_does():
    """Before: no standardisation, the default LogisticRegression and the subgradient steps learn mostly
    from the 1e8 feature (NDCG@10 0.73 here, against 0.99 for LinearRanker)."""
    X, y, q, Xt, yt, qt = _raw_scale_data()
    linear = _quiet(LinearRanker("listnet", max_iter=60).fit, X, y, qid=q).score(Xt, yt, qid=qt)
    reduction = PairwiseReductionRanker(random_state=0).fit(X, y, qid=q).score(Xt, yt, qid=qt)
    structured = StructuredHingeRanker(random_state=0).fit(X, y, qid=q).score(Xt, yt, qid=qt)
    assert linear > 0.95
    assert reduction >= linear - 0.02 and structured >= linear - 0.02, (linear, reduction, structured)
    # the same models without standardisation fall far behind, and say why
    with pytest.warns(UserWarning, match=r"standardize=False\): the feature scales .* range from .* to [\d.]+e\+08"):
        raw = PairwiseReductionRanker(random_state=0, standardize=False).fit(X, y, qid=q).score(Xt, yt, qid=qt)
    with pytest.warns(UserWarning, match=r"StructuredHingeRanker\(standardize=False\): the feature scales"):
        StructuredHingeRanker(random_state=0, standardize=False).fit(X, y, qid=q)
    assert raw < linear - 0.1


def test_standardised_models_keep_raw_feature_coefficients_and_round_trip(tmp_path):
    import rankwise

    X, y, q, Xt, _, qt = _raw_scale_data()
    m = StructuredHingeRanker(random_state=0).fit(X, y, qid=q)
    np.testing.assert_allclose(m.predict(Xt), Xt.astype(np.float64) @ m.coef_ + m.intercept_)
    r = PairwiseReductionRanker(random_state=0).fit(X, y, qid=q)
    r.save(tmp_path / "r.npz")
    np.testing.assert_array_equal(rankwise.load(tmp_path / "r.npz").predict(Xt, qid=qt), r.predict(Xt, qid=qt))


@pytest.mark.parametrize("kind", ["linear", "neural", "reduction", "structured"])
def test_the_cli_gives_every_model_the_same_preprocessing(kind):
    from rankwise.cli.inputs import build_model

    model = build_model(kind, None, {}, 0)
    assert model.get_params()["standardize"] is True  # GBDT: trees do not depend on feature scales


# ---------------------------------------------------------------------------------- item 2: feature names

def test_feature_names_are_kept_and_checked(model):
    pd = pytest.importorskip("pandas")
    X, y, q = make_data(n_queries=8, list_len=5)
    cols = [f"f{i}" for i in range(X.shape[1])]
    df = pd.DataFrame(X, columns=cols)
    _quiet(model.fit, df, y, qid=q)
    assert list(model.feature_names_in_) == cols
    base = model.predict(df, qid=q)
    with pytest.raises(InputError, match=r"(?s)feature names should match .*same order as they were in "
                                         r"fit.*X\[model.feature_names_in_\]"):
        model.predict(df[cols[::-1]], qid=q)
    with pytest.raises(InputError, match=r"(?s)Feature names unseen at fit time:\n- g0\n.*seen at fit time, yet now "
                                         r"missing:\n- f0"):
        model.predict(df.rename(columns={"f0": "g0"}), qid=q)
    with pytest.raises(InputError, match="feature names should match"):
        model.score(df[cols[::-1]], y, qid=q)
    np.testing.assert_array_equal(model.predict(df[cols], qid=q), base)  # the right columns: same scores
    with pytest.warns(UserWarning, match="X does not have valid feature names, but .* was fitted with feature names"):
        model.predict(X, qid=q)
    _quiet(model.fit, X, y, qid=q)  # refit on an array: the names are forgotten
    assert not hasattr(model, "feature_names_in_")


# ---------------------------------------------------------------------------------- item 3: predict without qid

def test_reduction_predict_without_qid_says_it_scores_one_query():
    X, y, q = make_data(n_queries=8, list_len=5)
    m = PairwiseReductionRanker(random_state=0).fit(X, y, qid=q)
    with pytest.warns(UserWarning, match=r"predict\(X\) got no qid, so all 40 rows are scored as ONE query") as rec:
        m.predict(X)
    assert len(rec) == 1 and rec[0].filename == __file__  # one warning, pointing at this line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.predict(X, qid=q)
        m.predict(X[:5], qid=q[:5])


def test_every_ranker_takes_qid_in_predict(model):
    X, y, q = make_data(n_queries=8, list_len=5)
    _quiet(model.fit, X, y, qid=q)
    s = model.predict(X, qid=q)
    assert s.shape == (40,)
    with pytest.raises(InputError, match=r"qid has shape \(39,\) but X has 40 rows"):
        model.predict(X, qid=q[:-1])
    with pytest.raises(TypeError):  # keyword-only, as the contract says
        model.predict(X, q)


# ---------------------------------------------------------------------------------- item 4: GridSearchCV

def test_grid_search_without_metadata_routing_raises_instead_of_nan():
    X, y, q = make_data(n_queries=12, list_len=5)
    gs = GridSearchCV(LinearRanker(max_iter=5, verbose=False), {"alpha": [1e-3, 1.0]}, cv=GroupKFold(n_splits=3))
    with sklearn.config_context(enable_metadata_routing=False):
        with pytest.raises(InputError, match=r"qid reached fit but will not reach score.*enable_metadata_routing="
                                             r"True.*set_score_request\(qid=True\)"):
            _quiet(gs.set_params(error_score="raise").fit, X, y, qid=q, groups=q)
        with pytest.raises(ValueError, match=r"(?s)All the 6 fits failed.*qid reached fit but will not reach score"):
            _quiet(gs.set_params(error_score=np.nan).fit, X, y, qid=q, groups=q)
        # a scorer that needs no qid still works without routing
        from sklearn.model_selection import cross_val_score

        scores = _quiet(cross_val_score, LinearRanker(max_iter=5, verbose=False), X, y, groups=q,
                        cv=GroupKFold(n_splits=3), params={"qid": q}, scoring="neg_mean_squared_error")
        assert np.all(np.isfinite(scores))


def test_score_without_qid_names_score_not_fit():
    X, y, q = make_data(n_queries=8, list_len=5)
    m = LinearRanker(max_iter=5, verbose=False)
    _quiet(m.fit, X, y, qid=q)
    with pytest.raises(InputError, match=r"qid is required: .* score\(X, y, qid=qid\)") as exc:
        m.score(X, y)
    assert "fit(X, y, qid=qid)" not in str(exc.value)


# ---------------------------------------------------------------------------------- item 5: CLI predict

def test_cli_predicts_sparse_files_with_fewer_features_and_unlabelled_rows(tmp_path, capsys):
    from rankwise.cli import main

    rng = np.random.default_rng(0)
    lines = []
    for qid in range(6):
        for _ in range(5):
            feats = rng.random(8)
            lines.append(f"{rng.integers(0, 3)} qid:{qid} " + " ".join(f"{i + 1}:{v:.4f}" for i, v in enumerate(feats)))
    (tmp_path / "train.txt").write_text("\n".join(lines) + "\n")
    assert main(["train", str(tmp_path / "train.txt"), "--param", "max_iter=5", "--out", str(tmp_path / "m.npz")]) == 0
    # highest feature index 3 < the model's 8; no labels at all
    (tmp_path / "new.txt").write_text("qid:1 1:0.5 3:0.25\nqid:1 2:0.75\n# a comment\nqid:2 1:0.1\nqid:2 3:1.0\n")
    out = tmp_path / "scores.txt"
    # issue 28: without being told, fewer features than the model is refused, naming both counts
    code = main(["predict", str(tmp_path / "m.npz"), str(tmp_path / "new.txt"), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "has 3 features" in err and "trained on 8" in err and not out.exists()
    # --pad-features: sparse SVMlight's zeros for the absent features
    code = main(["predict", str(tmp_path / "m.npz"), str(tmp_path / "new.txt"), "--out", str(out), "--pad-features"])
    err = capsys.readouterr().err
    assert code == 0, err
    import rankwise

    model = rankwise.load(tmp_path / "m.npz")
    X = np.zeros((4, 8), dtype=np.float32)
    X[0, [0, 2]] = 0.5, 0.25
    X[1, 1] = 0.75
    X[2, 0] = 0.1
    X[3, 2] = 1.0
    np.testing.assert_allclose(np.loadtxt(out), model.predict(X), rtol=1e-6)
    # more features than the model: a clear error
    (tmp_path / "wide.txt").write_text("0 qid:1 1:0.5 9:0.25\n1 qid:1 2:0.75\n")
    assert main(["predict", str(tmp_path / "m.npz"), str(tmp_path / "wide.txt"), "--out", str(out)]) == 2
    assert "9" in capsys.readouterr().err


# ---------------------------------------------------------------------------------- item 6: one default

def test_gbdt_default_loss_is_the_same_in_the_cli_and_in_python():
    from rankwise.cli.inputs import build_model

    assert build_model("gbdt", None, {}, 0).loss == GBDTRanker().loss
    assert build_model("linear", None, {}, 0).loss == LinearRanker().loss
    assert build_model("structured", None, {}, 0).measure == StructuredHingeRanker().measure


@pytest.mark.parametrize("backend, loss, labels, message", [
    ("lightgbm", "native:lambdarank", [0.5, 1.0], r"needs relevance grades: non-negative integers; got label 0.5"),
    ("lightgbm", "native:rank_xendcg", [-1.0, 1.0], r"needs relevance grades: non-negative integers; got label -1"),
    ("lightgbm", "native:lambdarank", [0.0, 40.0], r"gain table has 31 grades \(0..30\); got label 40"),
    ("xgboost", "native:rank:ndcg", [0.25, 1.0], r"needs relevance grades: non-negative integers; got label 0.25"),
    ("xgboost", "native:rank:map", [0.0, 2.0], r"needs binary labels \(0 or 1\); got label 2"),
])
def test_native_objectives_say_which_labels_they_take(backend, loss, labels, message):
    """Item 6: the libraries' own messages point at label_gain / 'relevance degree'; ours names the loss."""
    X, _, q = make_data(n_queries=4, list_len=5)
    y = np.resize(np.asarray(labels), len(q))
    with pytest.raises(InputError, match=message):
        GBDTRanker(loss=loss, backend=backend, n_estimators=2).fit(X, y, qid=q)


def test_native_lambdarank_takes_grades_above_30_with_a_gain_table():
    X, _, q = make_data(n_queries=4, list_len=5)
    y = np.resize(np.array([0.0, 40.0]), len(q))
    GBDTRanker(loss="native:lambdarank", n_estimators=2,
               loss_params={"label_gain": list(range(41))}).fit(X, y, qid=q)


# ---------------------------------------------------------------------------------- item 7: group=

def test_fit_accepts_lightgbm_group_sizes(model):
    X, y, q = make_data(n_queries=8, list_len=5)
    a = _quiet(clone(model).fit, X, y, qid=q).predict(X, qid=q)
    b = _quiet(clone(model).fit, X, y, group=[5] * 8).predict(X, qid=q)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    with pytest.raises(InputError, match=r"group sizes must be non-negative and sum to the number of rows \(40\); "
                                         r"they sum to 35"):
        model.fit(X, y, group=[5] * 7)
    with pytest.raises(InputError, match="give qid .* or group .*, not both"):
        model.fit(X, y, qid=q, group=[5] * 8)


def test_missing_qid_message_shows_both_forms():
    X, y, _ = make_data(n_queries=4, list_len=5)
    with pytest.raises(InputError, match=r"qid is required: one query id per row, e.g. fit\(X, y, qid=qid\) \(or "
                                         r"LightGBM-style query sizes: fit\(X, y, group=sizes\)\)"):
        LinearRanker().fit(X, y)


# ---------------------------------------------------------------------------------- item 8: conformance

def test_not_fitted_error_is_scikit_learns(model):
    from sklearn.exceptions import NotFittedError as SkNotFitted
    from sklearn.utils.validation import check_is_fitted

    from rankwise.errors import NotFittedError, RankwiseError

    assert issubclass(NotFittedError, SkNotFitted) and issubclass(NotFittedError, RankwiseError)
    with pytest.raises(SkNotFitted, match="not fitted yet"):
        model.predict(np.zeros((3, 6)), qid=[0, 0, 0])
    with pytest.raises(SkNotFitted):
        check_is_fitted(model)


def test_complex_and_zero_feature_input_fail_clearly(model):
    X, y, q = make_data(n_queries=4, list_len=5)
    with pytest.raises(InputError, match="Complex data not supported"):
        model.fit(X + 1j, y, qid=q)
    with pytest.raises(InputError, match=r"0 feature\(s\) \(shape=\(20, 0\)\) while a minimum of 1 is required"):
        model.fit(X[:, :0], y, qid=q)
    with pytest.raises(InputError, match=r"0 feature\(s\)"):
        model.fit(sp.csr_matrix(X[:, :0]), y, qid=q)


def test_sparse_input_works_in_every_model_as_the_tags_say(model):
    X, y, q = make_data(n_queries=8, list_len=5)
    assert model.__sklearn_tags__().input_tags.sparse
    _quiet(model.fit, sp.csr_matrix(X), y, qid=q)
    s = model.predict(sp.csr_matrix(X), qid=q)  # NeuralRanker fitted on CSR: a TypeError before (issue 17)
    assert s.shape == (40,) and np.all(np.isfinite(s))


# ---------------------------------------------------------------------------------- item 9: warnings

def test_single_document_warning_points_at_the_callers_line(model):
    X, y, q = make_data(n_queries=8, list_len=5)
    q = q.copy()
    q[0] = 99
    with pytest.warns(UserWarning, match="1 of 9 queries have a single document") as rec:
        model.fit(X, y, qid=q)
    mine = [w for w in rec if "single document" in str(w.message)]
    assert len(mine) == 1 and mine[0].filename == __file__


def test_lbfgs_warns_only_when_the_objective_is_still_falling(monkeypatch):
    """Before: every fit that stopped at max_iter warned "raise max_iter or tol, or standardise the
    features", also when the objective had long been flat and standardize=True (MSLR: every fit)."""
    import rankwise.models.linear as linear_mod

    X, y, q = make_data(n_queries=20, list_len=6)
    real = linear_mod.minimize_erm

    def stopped_at_max_iter(*args, **kwargs):  # a run whose tolerance was never met, objective flat
        w, res = real(*args, **kwargs)
        res.status = 1
        return w, res
    monkeypatch.setattr(linear_mod, "minimize_erm", stopped_at_max_iter)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = LinearRanker("listnet", alpha=1e-2, max_iter=60, tol=1e-15, verbose=False).fit(X, y, qid=q)
    flat = m.history_["loss"]
    assert abs(flat[-3] - flat[-1]) <= 1e-4 * abs(flat[-1])  # what made it silent
    monkeypatch.setattr(linear_mod, "minimize_erm", real)
    with pytest.warns(UserWarning, match=r"reached max_iter=2 .* still fell by .* raise max_iter$") as rec:
        LinearRanker("listnet", max_iter=2, verbose=False).fit(X, y, qid=q)
    assert len(rec) == 1 and rec[0].filename == __file__ and "standardi" not in str(rec[0].message)
    with pytest.warns(UserWarning, match=r"or standardise the features \(standardize=True\)"):
        LinearRanker("listnet", max_iter=2, standardize=False, verbose=False).fit(X, y, qid=q)


# ---------------------------------------------------------------------------------- item 10: messages

def test_cli_missing_qid_hint_names_the_cli_option(tmp_path, capsys):
    from rankwise.cli import main

    (tmp_path / "noqid.txt").write_text("1 1:0.5 2:0.25\n0 1:0.1 2:0.3\n")
    code = main(["train", str(tmp_path / "noqid.txt"), "--out", str(tmp_path / "m.npz")])
    err = capsys.readouterr().err
    assert code == 2 and "--group FILE" in err and "query_file=" not in err
    (tmp_path / "noqid.txt.sizes").write_text("2\n")
    code = main(["train", str(tmp_path / "noqid.txt"), "--group", str(tmp_path / "noqid.txt.sizes"),
                 "--param", "max_iter=2", "--out", str(tmp_path / "m.npz")])
    assert code == 0, capsys.readouterr().err


# ---------------------------------------------------------------------------------- the contract (issue 13)

def test_parameter_constraints_are_declared_and_checked_in_one_place(model):
    from rankwise._validation import check_params

    assert model._parameter_constraints  # every model declares its constraints
    for name in model._parameter_constraints:
        assert name in model.get_params(), name
    bad = {"max_iter": 0, "n_estimators": 0, "learning_rate": -1.0, "batch_size": 0}
    name = next(n for n in bad if n in model._parameter_constraints)
    with pytest.raises(InputError, match=rf"{type(model).__name__}: {name} must be .*; got {bad[name]}"):
        clone(model).set_params(**{name: bad[name]}).fit(*make_data(n_queries=4, list_len=5)[:2],
                                                         qid=make_data(n_queries=4, list_len=5)[2])
    check_params(type(model).__name__, model.get_params(), model._parameter_constraints)  # defaults pass


@pytest.mark.parametrize("cls,old,new,value,expected", [
    (LinearRanker, "lr", "learning_rate", 0.5, 0.5),
    (NeuralRanker, "epochs", "max_iter", 3, 3),
    (NeuralRanker, "weight_decay", "alpha", 0.1, 0.1),
    (StructuredHingeRanker, "C", "alpha", 4.0, 0.25),
    (StructuredHingeRanker, "n_epochs", "max_iter", 3, 3),
])
def test_former_parameter_names_still_work_with_a_deprecation_warning(cls, old, new, value, expected):
    with pytest.warns(DeprecationWarning, match=rf"the parameter '{old}' is deprecated .* use '{new}'") as rec:
        m = cls(**{old: value})
    assert rec[0].filename == __file__
    assert m.get_params()[new] == expected and old not in m.get_params()
    with pytest.warns(DeprecationWarning):
        m.set_params(**{old: value})
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        cls(nope=1)


def test_common_hyper_parameters_have_one_name():
    names = {cls: set(cls().get_params()) for cls in (LinearRanker, NeuralRanker, GBDTRanker,
                                                      PairwiseReductionRanker, StructuredHingeRanker)}
    for old in ("lr", "epochs", "n_epochs", "weight_decay", "C"):
        assert not any(old in n for n in names.values()), old
    assert all("random_state" in n for n in names.values())
    for cls in (LinearRanker, NeuralRanker, StructuredHingeRanker):
        assert {"learning_rate", "max_iter"} <= names[cls] and "alpha" in names[cls]
    assert {"learning_rate", "n_estimators", "n_jobs"} <= names[GBDTRanker]


def test_models_pickle_with_their_torch_modules():
    import pickle

    X, y, q = make_data(n_queries=6, list_len=5)
    m = NeuralRanker(hidden=(4,), max_iter=1, random_state=0, verbose=False).fit(X, y, qid=q)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(m)).predict(X), m.predict(X))
    assert hasattr(m, "module_")  # pickling left the model intact


def test_distributed_predict_groups_the_rows_of_a_reduction_by_query():
    """Before: distributed.predict called predict(X) for every model but the attention network, so
    the pairwise reduction scored each partition as one list."""
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    from rankwise import distributed as rd

    X, y, q = make_data(n_queries=10, list_len=6, shuffle=True)
    m = PairwiseReductionRanker(random_state=0).fit(X, y, qid=q)
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])]).assign(qid=q, label=y)
    got = rd.predict(m, dd.from_pandas(df, npartitions=3), features=[f"f{i}" for i in range(X.shape[1])])
    got = got.compute(scheduler="synchronous")
    want = pd.Series(m.predict(X, qid=q), index=df.index)
    np.testing.assert_allclose(got["score"].sort_index().to_numpy(), want.sort_index().to_numpy(), rtol=1e-9)


def test_a_diverging_fit_raises_a_rankwise_error():
    """Issue 13: FloatingPointError escaped the RankwiseError hierarchy (train/loop.py)."""
    from rankwise.errors import RankwiseError
    from rankwise.train.loop import TrainingDivergedError

    def overflowing(scores, labels, *, where=None, weights=None, reduction="mean"):
        return (scores * 0.0).sum() + float("inf")

    X, y, q = make_data(n_queries=6, list_len=5)
    with pytest.raises(TrainingDivergedError, match="lower the learning rate") as exc:
        LinearRanker(overflowing, solver="adam", max_iter=2, verbose=False).fit(X, y, qid=q)
    assert isinstance(exc.value, RankwiseError) and isinstance(exc.value, FloatingPointError)


@pytest.mark.parametrize("make", [lambda: LinearRanker(max_iter=3, standardize=False, verbose=False),
                                  lambda: NeuralRanker(hidden=(4,), max_iter=1, standardize=False, verbose=False)])
def test_torch_models_told_not_to_standardise_say_so_on_raw_scales(make):
    X, y, q, _, _, _ = _raw_scale_data()
    with pytest.warns(UserWarning, match=r"\(standardize=False\): the feature scales"):
        _ = make().fit(X, y, qid=q)


def test_cli_checks_parameter_values_before_reading_data(tmp_path, capsys):
    from rankwise.cli import main

    missing = tmp_path / "not-read.txt"  # never opened: the parameter is wrong first
    for param, what in (("max_iter=-3", "max_iter must be an integer >= 1; got -3"),
                        ("alpha=abc", "alpha must be a finite number >= 0; got 'abc'")):
        code = main(["train", str(missing), "--param", param, "--out", str(tmp_path / "m.npz")])
        err = capsys.readouterr().err
        assert code == 2 and what in err and "not-read" not in err, err
