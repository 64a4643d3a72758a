"""save -> load -> predict, bitwise, for every model family on data with missing values (issue 28,
defects 2 and 3): NaN features (LETOR's ``NULL``), categorical columns, linear trees, every
objective, early-stopped models; the booster in the file opened with LightGBM / XGBoost
themselves gives ``predict``'s scores; the model's feature names reach the booster."""
from __future__ import annotations

import gzip
import warnings

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
import xgboost as xgb

import rankwise
from rankwise.data import RankingDataset, make_synthetic, read_svmlight
from rankwise.errors import InputError
from rankwise.models import (FeatureRanker, GBDTRanker, LinearRanker, NeuralRanker, PairwiseReductionRanker,
                             StructuredHingeRanker, persistence)
from rankwise.models._booster_text import BoosterTextError, check_lightgbm_text, check_xgboost_json
from rankwise.models.gbdt import booster_feature_names
from rankwise.models.reduction import make_classifier


def _with_nulls(X, y, rng, *, cat=True):
    """Missing values as real feature files have them: a field absent for some documents (its
    zeros or low values become NaN, more often for the non-relevant ones), a few NaN anywhere, and
    a categorical column (a site id: relevant documents come from a few sites) with NaN too."""
    X = np.array(X, dtype=np.float32)
    for j in range(0, X.shape[1], 3):
        absent = (X[:, j] <= np.quantile(X[:, j], 0.3)) & (rng.random(len(y)) < np.where(y > 0, 0.3, 0.9))
        X[absent, j] = np.nan
    X[rng.random(X.shape) < 0.03] = np.nan
    if cat:
        site = np.where(y >= 2, rng.choice([3, 7, 11], len(y)), rng.integers(0, 40, len(y))).astype(np.float32)
        site[rng.random(len(y)) < 0.1] = np.nan
        X = np.column_stack([X, site])
    return X


def _synthetic(seed):
    ds = make_synthetic(60, n_features=12, list_length=(5, 25), seed=seed)
    y = ds.labels
    return _with_nulls(ds.X, y, np.random.default_rng(seed)), y, ds.qid


def _mq2008(folder, part, n_queries, tmp):
    with gzip.open(folder / "Fold1" / f"{part}.txt.gz", "rb") as fh:
        lines, qids = [], []
        for line in fh:
            q = line.split()[1]
            if q not in qids:
                if len(qids) == n_queries:
                    break
                qids.append(q)
            lines.append(line)
    (tmp / f"{part}.txt").write_bytes(b"".join(lines))
    ds = read_svmlight(tmp / f"{part}.txt")
    X = ds.X.toarray() if hasattr(ds.X, "toarray") else np.asarray(ds.X)
    return _with_nulls(X, ds.labels, np.random.default_rng(7)), ds.labels, ds.qid


@pytest.fixture(scope="module", params=["synthetic", "mq2008"])
def nan_data(request, tmp_path_factory):
    """(train, valid, test) triples of (X, y, qid) with NaN features and a categorical last column."""
    if request.param == "synthetic":
        return _synthetic(0), _synthetic(1), _synthetic(2)
    folder, tmp = request.getfixturevalue("mq2008_dir"), tmp_path_factory.mktemp("mq2008")
    return _mq2008(folder, "train", 60, tmp), _mq2008(folder, "vali", 30, tmp), _mq2008(folder, "test", 30, tmp)


def _cat_col(X):
    return X.shape[1] - 1


# model, whether it is early-stopped (fit with eval_set), labels binarised (rank:map)
GBDT = {
    "lightgbm-lambdarank": lambda X: GBDTRanker("lambdarank"),
    "lightgbm-listnet": lambda X: GBDTRanker("listnet"),
    "lightgbm-native-lambdarank": lambda X: GBDTRanker("native:lambdarank"),
    "lightgbm-native-xendcg": lambda X: GBDTRanker("native:rank_xendcg"),
    "lightgbm-zero-as-missing": lambda X: GBDTRanker("lambdarank", backend_params={"zero_as_missing": True}),
    "lightgbm-categorical": lambda X: GBDTRanker("lambdarank",
                                                 backend_params={"categorical_feature": str(_cat_col(X))}),
    "lightgbm-linear-tree": lambda X: GBDTRanker("lambdarank", backend_params={"linear_tree": True}),
    "lightgbm-early-stopped": lambda X: GBDTRanker("lambdarank", n_estimators=300, learning_rate=0.5,
                                                   early_stopping_rounds=3),
    "xgboost-lambdarank": lambda X: GBDTRanker("lambdarank", backend="xgboost"),
    "xgboost-native-ndcg": lambda X: GBDTRanker("native:rank:ndcg", backend="xgboost"),
    "xgboost-native-pairwise": lambda X: GBDTRanker("native:rank:pairwise", backend="xgboost"),
    "xgboost-native-map": lambda X: GBDTRanker("native:rank:map", backend="xgboost"),
    "xgboost-categorical": lambda X: GBDTRanker(
        "lambdarank", backend="xgboost", backend_params={"feature_types": ["q"] * (X.shape[1] - 1) + ["c"]}),
    "xgboost-early-stopped": lambda X: GBDTRanker("lambdarank", backend="xgboost", n_estimators=300,
                                                  learning_rate=0.5, early_stopping_rounds=3),
}


def _fit_gbdt(name, data):
    (X, y, q), (Xv, yv, qv), _ = data
    if name.endswith("map"):
        y, yv = (y > 0).astype(float), (yv > 0).astype(float)
    m = GBDT[name](X)
    m.set_params(random_state=0, n_jobs=1, verbose=False, min_child_samples=5,
                 **({} if m.early_stopping_rounds else {"n_estimators": 15}))
    kw = {"eval_set": (Xv, yv, qv)} if m.early_stopping_rounds else {}
    return m.fit(X, y, qid=q, **kw)


def _native_scores(path, X, xgb_by_hand):
    """The booster text in the file, opened and run by the library itself (no rankwise code): LightGBM's raw
    score; for XGBoost, its trees walked by hand with their float32 leaves summed in double (as ``predict``
    sums them), after checking that the walk gives XGBoost's own (float32) margin bit for bit."""
    text = persistence.array_to_text(persistence._read(path)[1]["booster"])
    if text.startswith("tree\n"):
        b = lgb.Booster(model_str=text)
        return b, np.asarray(b.predict(X, raw_score=True), dtype=np.float64)
    b = xgb.Booster()
    b.load_model(bytearray(text.encode("utf-8")))
    dm = xgb.DMatrix(X, missing=np.nan, feature_names=b.feature_names, feature_types=b.feature_types,
                     enable_categorical=b.feature_types is not None)
    hand = xgb_by_hand(b)
    np.testing.assert_array_equal(hand.float32_margin(X), np.asarray(b.predict(dm, output_margin=True), np.float64))
    return b, hand.margin(X)


@pytest.mark.parametrize("name", list(GBDT))
def test_gbdt_on_missing_values_round_trips_bitwise_and_the_library_reads_the_file(tmp_path, nan_data, name,
                                                                                   xgb_by_hand):
    _, _, (Xt, _, qt) = nan_data
    m = _fit_gbdt(name, nan_data)
    expected = m.predict(Xt)
    path = m.save(tmp_path / "m.npz")
    loaded = rankwise.load(path)
    np.testing.assert_array_equal(loaded.predict(Xt), expected)
    if name == "lightgbm-lambdarank":  # the load a file from elsewhere gets: checked in a child process first
        np.testing.assert_array_equal(rankwise.load(path, untrusted=True).predict(Xt), expected)
    booster, native = _native_scores(path, Xt, xgb_by_hand)
    np.testing.assert_array_equal(native, expected)
    if m.early_stopping_rounds:
        n_file = booster.current_iteration() if m.backend == "lightgbm" else booster.num_boosted_rounds()
        assert n_file == m.best_iteration_ + 1 < m.n_estimators_
        # the in-memory booster keeps every round: with all of them the scores differ
        every = (m.booster_.predict(Xt, raw_score=True, num_iteration=m.n_estimators_) if m.backend == "lightgbm"
                 else m.booster_.predict(xgb.DMatrix(Xt, missing=np.nan), output_margin=True,
                                         validate_features=False))
        assert not np.array_equal(every, expected)
        assert loaded.best_iteration_ == m.best_iteration_


def test_the_missing_value_splits_are_the_ones_lightgbm_writes_with_inf_thresholds():
    """The data above makes LightGBM write what broke loading: 'inf' thresholds ("every value
    left, NaN right"), categorical splits and linear-tree leaves; XGBoost categorical splits."""
    import json

    data = _synthetic(0), _synthetic(1), _synthetic(2)
    trees = json.loads(_fit_gbdt("xgboost-categorical", data)._booster_to_text())["learner"]["gradient_booster"]
    assert any(1 in t["split_type"] for t in trees["model"]["trees"])
    texts = {n: _fit_gbdt(n, data)._booster_to_text() for n in ("lightgbm-lambdarank", "lightgbm-categorical",
                                                                 "lightgbm-linear-tree")}
    assert any(" inf" in ln or "=inf" in ln for ln in texts["lightgbm-lambdarank"].splitlines()
               if ln.startswith("threshold="))
    assert "\ncat_threshold=" in texts["lightgbm-categorical"]
    assert "\nis_linear=1\n" in texts["lightgbm-linear-tree"]
    assert any(ln.startswith("num_features=") and set(ln[len("num_features="):].split()) != {"0"}
               for ln in texts["lightgbm-linear-tree"].splitlines())
    for text in texts.values():
        check_lightgbm_text(text, n_features=13)


# -- the other families: NaN refused at fit with a clear message; the round trip on the same rows imputed
OTHERS = {
    "linear": lambda: LinearRanker("listnet", max_iter=30),
    "linear-early-stopped": lambda: LinearRanker("listnet", solver="adam", max_iter=60, early_stopping_rounds=2),
    "neural": lambda: NeuralRanker("listnet", hidden=(8,), max_iter=3),
    "neural-attention": lambda: NeuralRanker("listmle", architecture="attention", hidden=(8, 4), max_iter=2),
    "neural-early-stopped": lambda: NeuralRanker("listnet", hidden=(8,), max_iter=40, early_stopping_rounds=2),
    "reduction-logistic": lambda: PairwiseReductionRanker(),
    "reduction-lightgbm": lambda: PairwiseReductionRanker(make_classifier("lightgbm", 0)),
    "structured": lambda: StructuredHingeRanker(max_iter=5),
    "feature": lambda: FeatureRanker(2),
}


@pytest.mark.parametrize("name", list(OTHERS))
def test_other_families_refuse_nan_clearly_and_round_trip_bitwise(tmp_path, name):
    (X, y, q), (Xv, yv, qv), (Xt, _, qt) = (tuple(a[:300] for a in _synthetic(s)) for s in (0, 1, 2))
    with pytest.raises(InputError, match=r"X contains NaN"):
        OTHERS[name]().fit(X, y, qid=q)
    X, Xv, Xt = (np.nan_to_num(a, nan=0.0) for a in (X, Xv, Xt))
    m = OTHERS[name]()
    if "random_state" in m.get_params():
        m.set_params(random_state=0)
    kw = {"eval_set": (Xv, yv, qv)} if "early-stopped" in name else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(X, y, qid=q, **kw)
    if "early-stopped" in name:
        assert m.best_iteration_ < len(m.history_["loss"]) - 1
    pkw = {"qid": qt}
    loaded = rankwise.load(m.save(tmp_path / "m.npz"))
    np.testing.assert_array_equal(loaded.predict(Xt, **pkw), m.predict(Xt, **pkw))


# -- feature names ------------------------------------------------------------------------------
COLUMNS = ["bm25 title", "pagerank", "in,links", "tf[body]", "größe", "url\tlen", "q:len", "a{b}", "x<y",
           'say "hi"', "tf-idf", "dup", "site"]


def test_booster_feature_names_rule():
    assert booster_feature_names(None) is None
    assert booster_feature_names(["bm25 title", "a,b", "x[1]", "größe", "tab\tnl\n"]) == \
        ["bm25_title", "a_b", "x_1_", "größe", "tab_nl_"]
    # names that coincide once adapted, or an empty name: every name gets its column index
    assert booster_feature_names(["a b", "a_b", "c"]) == ["a_b_0", "a_b_1", "c_2"]
    assert booster_feature_names(["", "c"]) == ["_0", "c_1"]


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_feature_names_reach_the_booster_and_its_file(tmp_path, backend):
    (X, y, q), _, (Xt, _, _) = _synthetic(0), _synthetic(1), _synthetic(2)
    frame = pd.DataFrame(X, columns=COLUMNS)
    m = GBDTRanker("lambdarank", backend=backend, n_estimators=5, random_state=0, n_jobs=1, verbose=False)
    m.fit(frame, y, qid=q)
    want = booster_feature_names(COLUMNS)
    assert want[:4] == ["bm25_title", "pagerank", "in_links", "tf_body_"] and want[-1] == "site"
    loaded = rankwise.load(m.save(tmp_path / "m.npz"))
    for b in (m.booster_, loaded.booster_):
        if backend == "lightgbm":
            assert b.feature_name() == want
            assert b.dump_model()["feature_names"] == want
        else:
            assert b.feature_names == want
            assert any(f"[{n}<" in d for d in b.get_dump() for n in want)
    test = pd.DataFrame(Xt, columns=COLUMNS)
    np.testing.assert_array_equal(loaded.predict(test), m.predict(test))
    np.testing.assert_array_equal(m.predict(Xt), m.predict(test))  # an array still predicts (with a warning)


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_a_ranking_datasets_feature_names_reach_the_booster(backend):
    X, y, q = _synthetic(0)
    ds = RankingDataset.from_arrays(X, y, q, feature_names=[f"feat {i}" for i in range(X.shape[1])], allow_nan=True)
    m = GBDTRanker("lambdarank", backend=backend, n_estimators=3, random_state=0, n_jobs=1, verbose=False).fit(ds)
    names = m.booster_.feature_name() if backend == "lightgbm" else m.booster_.feature_names
    assert names == [f"feat_{i}" for i in range(X.shape[1])]


def test_names_set_on_an_xgboost_booster_after_fit_do_not_break_predict(tmp_path):
    (X, y, q), _, (Xt, _, _) = _synthetic(0), _synthetic(1), _synthetic(2)
    m = GBDTRanker("lambdarank", backend="xgboost", n_estimators=5, random_state=0, n_jobs=1, verbose=False)
    before = m.fit(X, y, qid=q).predict(Xt)
    m.booster_.feature_names = [f"f_{i}" for i in range(X.shape[1])]
    np.testing.assert_array_equal(m.predict(Xt), before)
    loaded = rankwise.load(m.save(tmp_path / "m.npz"))
    assert loaded.booster_.feature_names == [f"f_{i}" for i in range(X.shape[1])]
    np.testing.assert_array_equal(loaded.predict(Xt), before)


# -- the command line on an SVMlight file with NULL values ---------------------------------------
@pytest.mark.realdata
@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_cli_train_then_predict_on_svmlight_with_null(mq2008_dir, tmp_path, backend, capsys):
    from rankwise.cli import main

    X, y, q = _mq2008(mq2008_dir, "train", 60, tmp_path)
    lines = []
    for i in range(len(y)):
        feats = " ".join(f"{j + 1}:{'NULL' if np.isnan(v) else repr(float(v))}" for j, v in enumerate(X[i]))
        lines.append(f"{int(y[i])} qid:{q[i]} {feats}\r\n")
    data = tmp_path / "null.txt"
    data.write_text("".join(lines), newline="")
    assert "NULL" in data.read_text()
    model = tmp_path / "m.npz"
    assert main(["train", str(data), "--model", "gbdt", "--loss", "lambdarank", "--param", "n_estimators=20",
                 "--param", f"backend={backend}", "--param", "n_jobs=1", "--out", str(model)]) == 0
    assert main(["predict", str(model), str(data), "--out", str(tmp_path / "s")]) == 0
    capsys.readouterr()
    scores = np.loadtxt(tmp_path / "s")
    ds = read_svmlight(data)
    np.testing.assert_array_equal(scores, rankwise.load(model).predict(ds.X))
    if backend == "lightgbm":
        assert "inf" in persistence.array_to_text(persistence._read(model)[1]["booster"])


# -- what cannot come from the libraries is still refused -----------------------------------------
def _lgb_text(name):
    data = _synthetic(0), _synthetic(1), _synthetic(2)
    return _fit_gbdt(name, data)._booster_to_text()


def _edit_tree_line(text, key, edit, tree=0):
    """Apply ``edit`` to the value of ``key`` in tree ``tree`` and fix ``tree_sizes`` (a forger's edit)."""
    start = text.index(f"\nTree={tree}\n") + 1
    at = text.index(f"\n{key}=", start) + 1
    end = text.index("\n", at)
    line = key + "=" + edit(text[at + len(key) + 1:end])
    delta = len(line.encode()) - len(text[at:end].encode())
    text = text[:at] + line + text[end:]
    sizes_at = text.index("tree_sizes=") + len("tree_sizes=")
    sizes_end = text.index("\n", sizes_at)
    sizes = text[sizes_at:sizes_end].split(" ")
    sizes[tree] = str(int(sizes[tree]) + delta)
    return text[:sizes_at] + " ".join(sizes) + text[sizes_end:]


def _first(value, new):
    toks = value.split(" ")
    toks[0] = new
    return " ".join(toks)


@pytest.mark.parametrize("case,key,edit,message", [
    ("lightgbm-lambdarank", "threshold", lambda v: _first(v, "-inf"), "is not a threshold"),
    ("lightgbm-lambdarank", "threshold", lambda v: _first(v, "nan"), "is not a threshold"),
    ("lightgbm-lambdarank", "threshold", lambda v: _first(v, "1e400"), "not finite"),
    ("lightgbm-lambdarank", "leaf_value", lambda v: _first(v, "inf"), "not a finite decimal number"),
    ("lightgbm-lambdarank", "decision_type", lambda v: _first(v, str(int(v.split()[0]) | 1)), "num_cat=0"),
    ("lightgbm-categorical", "cat_boundaries", lambda v: v.rsplit(" ", 1)[0] + " 999", "values, expected"),
    ("lightgbm-categorical", "cat_boundaries", lambda v: "1" + v[1:], "0 first"),
    ("lightgbm-categorical", "num_cat", lambda v: str(int(v) + 1), "thresholds must be the indices"),
    ("lightgbm-categorical", "cat_threshold", lambda v: _first(v, "-1"), "out of range"),
    ("lightgbm-linear-tree", "leaf_features", lambda v: v.replace("1", "99", 1), "out of range"),
    ("lightgbm-linear-tree", "leaf_features", lambda v: v.replace(" ", "", 1), "laid out|values, expected"),
    ("lightgbm-linear-tree", "leaf_coeff", lambda v: v.replace("0.", "inf", 1) if "0." in v else "x", "finite"),
    ("lightgbm-linear-tree", "num_features", lambda v: _first(v, "-1"), "out of range"),
    ("lightgbm-linear-tree", "is_linear", lambda v: "0", "comes with is_linear=1 only"),
])
def test_forged_lightgbm_texts_are_refused(case, key, edit, message):
    text = _lgb_text(case)
    check_lightgbm_text(text)
    tree = 0
    if key in ("leaf_features", "leaf_coeff"):  # a tree whose leaves have linear models
        tree = next(k for k, blk in enumerate(text.split("\nTree=")[1:])
                    if any(ln.startswith("leaf_features=") and ln.strip("leaf_features= ") for ln in blk.split("\n")))
    if case == "lightgbm-categorical":
        tree = next(k for k, blk in enumerate(text.split("\nTree=")[1:]) if "\ncat_threshold=" in blk)
    with pytest.raises(BoosterTextError, match=message):
        check_lightgbm_text(_edit_tree_line(text, key, edit, tree))


def test_forged_xgboost_categories_are_refused():
    import json

    data = _synthetic(0), _synthetic(1), _synthetic(2)
    text = _fit_gbdt("xgboost-categorical", data)._booster_to_text()
    check_xgboost_json(text)
    doc = json.loads(text)
    trees = doc["learner"]["gradient_booster"]["model"]["trees"]
    k = next(i for i, t in enumerate(trees) if t["categories_nodes"])

    def forged(edit):
        d = json.loads(text)
        edit(d["learner"]["gradient_booster"]["model"]["trees"][k])
        return json.dumps(d)

    for edit, message in [
        (lambda t: t["categories"].__setitem__(0, -1), "out of range"),
        (lambda t: t["categories"].__setitem__(0, 2**31), "out of range"),
        (lambda t: t["categories_sizes"].__setitem__(0, t["categories_sizes"][0] + 1), "do not tile"),
        (lambda t: t["categories_nodes"].__setitem__(0, t["categories_nodes"][0] + 1), "split_type is 1"),
        (lambda t: t["split_type"].__setitem__(0, 2), "out of range"),
        (lambda t: t["categories"].reverse() if len(t["categories"]) > 1 else t["categories"].append(-5),
         "increasing|out of range"),
    ]:
        with pytest.raises(BoosterTextError, match=message):
            check_xgboost_json(forged(edit))
    bad = json.loads(text)
    bad["learner"]["feature_types"][0] = "z"
    with pytest.raises(BoosterTextError, match="feature types"):
        check_xgboost_json(json.dumps(bad))


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_resume_from_a_named_checkpoint_takes_the_names_of_the_data_it_continues_on(tmp_path, backend):
    X, y, q = _synthetic(0)
    frame = pd.DataFrame(X, columns=[f"c{i}" for i in range(X.shape[1])])
    ck = tmp_path / "ck.npz"
    kw = dict(backend=backend, random_state=0, n_jobs=1, verbose=False)
    GBDTRanker("lambdarank", n_estimators=3, **kw).fit(frame, y, qid=q, checkpoint=ck)
    for data, names in ((X, None), (frame, list(frame.columns))):
        m = GBDTRanker("lambdarank", n_estimators=5, **kw).fit(data, y, qid=q, resume=ck)
        assert m.n_estimators_ == 5
        if backend == "xgboost":
            assert m.booster_.feature_names == names
        else:
            assert m.booster_.feature_name() == (names or [f"Column_{i}" for i in range(X.shape[1])])
