"""save/load without pickle: round trips for every model, format version, hostile files."""
from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

import rankwise
from _model_data import make_data
from rankwise.errors import InputError, NotFittedError
from rankwise.models import GBDTRanker, LinearRanker, NeuralRanker, persistence

MODELS = [
    lambda: LinearRanker("listnet", max_iter=20),
    lambda: LinearRanker("ranknet", feature_map="rff", n_components=16, random_state=0, max_iter=10),
    lambda: LinearRanker("listnet", solver="adam", feature_map="poly2", max_iter=2, random_state=0),
    lambda: NeuralRanker("listnet", hidden=(8,), epochs=2, random_state=0),
    lambda: NeuralRanker("listmle", architecture="attention", hidden=(8, 4), epochs=2, random_state=0),
    lambda: GBDTRanker("lambdaloss", n_estimators=5, random_state=0),
    lambda: GBDTRanker("native:lambdarank", n_estimators=5, random_state=0),
    lambda: GBDTRanker("listnet", backend="xgboost", n_estimators=5, random_state=0),
    lambda: GBDTRanker("native:rank:ndcg", backend="xgboost", n_estimators=5, random_state=0),
]


@pytest.mark.parametrize("make", MODELS)
def test_round_trip_predicts_identically(tmp_path, make):
    X, y, qid = make_data(n_queries=15, list_len=6)
    m = make().fit(X, y, qid=qid)
    path = m.save(tmp_path / "model.rw")
    loaded = rankwise.load(path)
    assert type(loaded) is type(m) and loaded.get_params() == m.get_params()
    kw = {"qid": qid} if getattr(m, "architecture", "mlp") == "attention" else {}
    np.testing.assert_array_equal(loaded.predict(X, **kw), m.predict(X, **kw))
    assert loaded.history_ == m.history_


def test_file_is_a_plain_npz_with_json_metadata(tmp_path):
    X, y, qid = make_data(n_queries=10, list_len=5)
    path = LinearRanker(max_iter=5).fit(X, y, qid=qid).save(tmp_path / "m")
    assert path.name == "m"  # no '.npz' appended
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
    assert {"__meta__.npy", "coef_.npy"} <= names
    with np.load(path, allow_pickle=False) as npz:
        meta = json.loads(npz["__meta__"].tobytes())
    assert meta["class"] == "LinearRanker" and meta["format_version"] == persistence.FORMAT_VERSION


def _rewrite_meta(src, dst, **changes):
    """A copy of ``src`` with metadata changes and freshly computed digests (a forged file)."""
    entries = persistence.raw_entries(src)
    meta = json.loads(np.lib.format.read_array(io.BytesIO(entries["__meta__"])).tobytes())
    meta.update(changes)
    return persistence.forge(dst, entries, meta)


def test_newer_format_version_is_refused(tmp_path):
    X, y, qid = make_data(n_queries=10, list_len=5)
    path = LinearRanker(max_iter=5).fit(X, y, qid=qid).save(tmp_path / "m.npz")
    _rewrite_meta(path, tmp_path / "new.npz", format_version=persistence.FORMAT_VERSION + 1)
    v = persistence.FORMAT_VERSION
    with pytest.raises(InputError, match=rf"format version {v + 1} .* reads versions up to {v}; upgrade rankwise"):
        rankwise.load(tmp_path / "new.npz")


def test_unknown_class_is_refused_not_imported(tmp_path):
    X, y, qid = make_data(n_queries=10, list_len=5)
    path = LinearRanker(max_iter=5).fit(X, y, qid=qid).save(tmp_path / "m.npz")
    _rewrite_meta(path, tmp_path / "evil.npz", **{"class": "os.system"})
    with pytest.raises(InputError, match=r"unknown model class 'os.system'"):
        rankwise.load(tmp_path / "evil.npz")


def test_pickled_object_arrays_are_never_loaded(tmp_path):
    class Boom:
        def __reduce__(self):
            return (exec, ("raise SystemExit('code ran')",))

    X, y, qid = make_data(n_queries=10, list_len=5)
    path = LinearRanker(max_iter=5).fit(X, y, qid=qid).save(tmp_path / "m.npz")
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arr = np.empty(1, dtype=object)
    arr[0] = Boom()
    arrays["coef_"] = arr
    with open(tmp_path / "p.npz", "wb") as fh:
        np.savez(fh, **arrays)
    with pytest.raises(InputError, match="integrity check failed for 'coef_'"):  # the digest no longer matches
        rankwise.load(tmp_path / "p.npz")
    # a forger who recomputes the digests still gets no code run: object arrays are never unpickled
    persistence.forge(tmp_path / "f.npz", persistence.raw_entries(tmp_path / "p.npz"))
    with pytest.raises(InputError, match="not a rankwise model file .*entry 'coef_'"):
        rankwise.load(tmp_path / "f.npz")


def test_garbage_and_missing_files(tmp_path):
    (tmp_path / "g.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match="not a rankwise model file"):
        rankwise.load(tmp_path / "g.npz")
    with pytest.raises(InputError, match="no such file"):
        rankwise.load(tmp_path / "absent.npz")
    buf = io.BytesIO()
    np.savez(buf, a=np.zeros(2))
    (tmp_path / "plain.npz").write_bytes(buf.getvalue())
    with pytest.raises(InputError, match="no '__meta__' entry"):
        rankwise.load(tmp_path / "plain.npz")


def test_save_before_fit_and_checkpoint_is_not_a_model(tmp_path):
    with pytest.raises(NotFittedError, match="not fitted yet"):
        LinearRanker().save(tmp_path / "x.npz")
    X, y, qid = make_data(n_queries=10, list_len=5)
    m = LinearRanker(max_iter=3)
    m.fit(X, y, qid=qid, checkpoint=tmp_path / "ck.npz")
    with pytest.raises(InputError, match="written with other parameters"):
        LinearRanker(max_iter=3, alpha=1.0).fit(X, y, qid=qid, resume=tmp_path / "ck.npz")
    m.save(tmp_path / "model.npz")
    with pytest.raises(InputError, match="is a saved model, not a training checkpoint"):
        LinearRanker(max_iter=3).fit(X, y, qid=qid, resume=tmp_path / "model.npz")


def test_subclass_protocol_registers_and_round_trips(tmp_path):
    from rankwise.models.base import BaseRanker

    class MeanFeatureRanker(BaseRanker):
        def __init__(self, sign=1.0, cols=(0, 1)):
            self.sign = sign
            self.cols = cols

        def fit(self, X, y=None, *, qid=None):
            data, _ = self._validate_fit(X, y, qid)
            self.n_features_in_ = data.X.shape[1]
            self.mean_ = np.asarray(data.X).mean(axis=0)
            return self

        def predict(self, X):
            X = self._check_predict_features(X)
            return self.sign * (X[:, list(self.cols)] - self.mean_[list(self.cols)]).sum(axis=1)

        def _get_state(self):
            return {"n_features_in_": self.n_features_in_}, {"mean_": self.mean_}

        def _set_state(self, state, arrays):
            self.n_features_in_ = state["n_features_in_"]
            self.mean_ = arrays["mean_"]

    assert persistence.MODEL_REGISTRY["MeanFeatureRanker"] is MeanFeatureRanker
    X, y, qid = make_data(n_queries=10, list_len=5)
    m = MeanFeatureRanker(sign=-1.0, cols=(2, 3)).fit(X, y, qid=qid)
    loaded = rankwise.load(m.save(tmp_path / "m.npz"))
    assert loaded.cols == (2, 3)  # tuples survive JSON
    np.testing.assert_array_equal(loaded.predict(X), m.predict(X))
    del persistence.MODEL_REGISTRY["MeanFeatureRanker"]


def _rewrite(src, dst, *, drop=(), meta_changes=None):
    entries = {k: v for k, v in persistence.raw_entries(src).items() if k not in drop}
    meta = json.loads(np.lib.format.read_array(io.BytesIO(entries["__meta__"])).tobytes())
    meta.update(meta_changes or {})
    return persistence.forge(dst, entries, meta)


@pytest.mark.parametrize("make,array,missing", [
    (lambda: LinearRanker("listnet", max_iter=20), "coef_", "missing entry 'coef_'"),
    (lambda: NeuralRanker("listnet", hidden=(8,), epochs=1, random_state=0), "module/net.0.weight",
     r'RuntimeError: .*Missing key\(s\) in state_dict: "net.0.weight"'),
    (lambda: GBDTRanker("listnet", n_estimators=2, min_child_samples=5, random_state=0), "booster",
     "missing entry 'booster'"),
], ids=["linear", "neural", "gbdt"])
def test_corrupt_or_hostile_files_give_input_errors(tmp_path, make, array, missing):
    import warnings

    X, y, qid = make_data(n_queries=10, list_len=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = make().fit(X, y, qid=qid).save(tmp_path / "m.npz")
    corrupt = r"cannot load .*: corrupt or not a rankwise"
    with pytest.raises(InputError, match=corrupt + ".*" + missing):
        rankwise.load(_rewrite(path, tmp_path / "missing.npz", drop=(array,)))
    with pytest.raises(InputError, match=corrupt + r".*missing entry 'n_features_in_'"):
        rankwise.load(_rewrite(path, tmp_path / "empty.npz", meta_changes={"state": {}}))
    with pytest.raises(InputError, match=r"state is a list, not an object"):
        rankwise.load(_rewrite(path, tmp_path / "list.npz", meta_changes={"state": [1, 2]}))
    with np.load(path, allow_pickle=False) as npz:
        params = json.loads(npz["__meta__"].tobytes())["params"]
    with pytest.raises(InputError, match=r"corrupt or not a rankwise \w+Ranker file \(its parameters do not match "
                                         r".*unexpected keyword argument 'evil'"):
        rankwise.load(_rewrite(path, tmp_path / "param.npz", meta_changes={"params": {**params, "evil": 1}}))
    with pytest.raises(InputError, match=r"params is a str, not an object"):
        rankwise.load(_rewrite(path, tmp_path / "pstr.npz", meta_changes={"params": "x"}))
    with pytest.raises(InputError, match=corrupt):  # a state entry of the wrong type
        rankwise.load(_rewrite(path, tmp_path / "type.npz", meta_changes={"state": {"n_features_in_": "six"}}))


def test_corrupt_gbdt_model_text_and_shapes_give_input_errors(tmp_path):
    X, y, qid = make_data(n_queries=10, list_len=5)
    path = GBDTRanker("listnet", n_estimators=2, min_child_samples=5, random_state=0).fit(X, y, qid=qid).save(
        tmp_path / "m.npz")
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["booster"] = persistence.text_to_array("tree\nnot a model")
    with open(tmp_path / "bad.npz", "wb") as fh:
        np.savez(fh, **arrays)
    with pytest.raises(InputError, match=r"cannot load .*bad.npz: integrity check failed for 'booster'"):
        rankwise.load(tmp_path / "bad.npz")
    persistence.forge(tmp_path / "forged.npz", persistence.raw_entries(tmp_path / "bad.npz"))
    with pytest.raises(InputError, match=r"cannot load .*forged.npz: corrupt or not a rankwise model file "
                                         r"\(BoosterTextError: booster text, end: no 'end of trees' line"):
        rankwise.load(tmp_path / "forged.npz")
    # a linear model whose arrays disagree with its number of features
    lin = LinearRanker("listnet", max_iter=50).fit(X, y, qid=qid).save(tmp_path / "lin.npz")
    with np.load(lin, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["scaler_mean_"] = np.zeros(3)
    with open(tmp_path / "shape.npz", "wb") as fh:
        np.savez(fh, **arrays)
    persistence.forge(tmp_path / "shape.npz", persistence.raw_entries(tmp_path / "shape.npz"))
    with pytest.raises(InputError, match=r"corrupt or not a rankwise model file \(ValueError: scaler_mean_ has shape "
                                         r"\(3,\), expected \(6,\)"):
        rankwise.load(tmp_path / "shape.npz")


# -- hostile model files (issue 17) -----------------------------------------------------------

@pytest.mark.slow
def test_files_that_crash_lightgbm_and_xgboost_are_refused_before_the_library_sees_them():
    """The issue's 37 crashing cases, found again: mutated booster texts that abort, segfault or
    hang the unprotected LightGBM / XGBoost (checked in forked children), each written with valid
    digests, must give an InputError from ``rankwise.load``. The cases run in a subprocess so that
    a miss kills that process, not the test suite."""
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).parent
    env = dict(__import__("os").environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(here / "_crash_cases.py"), "25", "12"], capture_output=True,
                          timeout=600, env=env)
    lines = [json.loads(x) for x in proc.stdout.decode().splitlines() if x.strip()]
    done = [d for d in lines if d["rankwise"] != "loading"]
    if proc.returncode != 0:
        last = lines[-1] if lines else None
        pytest.fail(f"the loading process died (exit {proc.returncode}) on case {last}: "
                    f"{proc.stderr.decode()[-500:]}")
    assert len(done) == 37
    assert {d["backend"] for d in done} == {"lightgbm", "xgboost"}
    assert all(d["library"] in ("SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE", "hang") for d in done)
    for d in done:
        assert d["rankwise"] == "InputError", d
        assert "case.npz: corrupt or not a rankwise model file (BoosterTextError: booster text" in d["message"], d


def _fitted(tmp_path, make=lambda: LinearRanker("listnet", max_iter=20)):
    import warnings

    X, y, qid = make_data(n_queries=10, list_len=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = make().fit(X, y, qid=qid)
    return m, m.save(tmp_path / "m.npz"), X


def _set_array(src, dst, name, arr, *, forge=True):
    entries = persistence.raw_entries(src)
    entries[name] = persistence._npy_bytes(np.asarray(arr))
    if forge:
        return persistence.forge(dst, entries)
    with zipfile.ZipFile(dst, "w") as zf:
        for k, v in entries.items():
            zf.writestr(k + ".npy", v)
    return dst


def test_edited_arrays_fail_the_integrity_check_naming_the_file_and_the_entry(tmp_path):
    m, path, X = _fitted(tmp_path)
    coef = m.coef_.copy()
    coef[0] += 1.0  # a plausible value: only the digest can tell
    _set_array(path, tmp_path / "edited.npz", "coef_", coef, forge=False)
    with pytest.raises(InputError, match=r"cannot load .*edited.npz: integrity check failed for 'coef_'"):
        rankwise.load(tmp_path / "edited.npz")
    data = bytearray(path.read_bytes())  # one byte flipped inside the metadata JSON
    i = data.index(b'"class"')
    data[i + 1] ^= 0x20
    (tmp_path / "flip.npz").write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"flip.npz: (not a rankwise model file \(BadZipFile: Bad CRC-32|integrity)"):
        rankwise.load(tmp_path / "flip.npz")


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_coefficients_are_refused_even_with_forged_digests(tmp_path, value):
    m, path, X = _fitted(tmp_path)
    coef = m.coef_.copy()
    coef[1] = value
    _set_array(path, tmp_path / "nan.npz", "coef_", coef)
    with pytest.raises(InputError, match=r"nan.npz: entry 'coef_' holds NaN or infinite values"):
        rankwise.load(tmp_path / "nan.npz")


def test_float_entries_and_json_constants_are_checked(tmp_path):
    m, path, X = _fitted(tmp_path)
    with np.load(path, allow_pickle=False) as npz:
        meta = json.loads(npz["__meta__"].tobytes())
    bad = dict(meta, state=dict(meta["state"], intercept_={"__float__": "abc"}))
    _rewrite_meta(path, tmp_path / "f.npz", **bad)
    with pytest.raises(InputError, match=r"corrupt or not a rankwise model file \(ValueError: '__float__' entry 'abc'"):
        rankwise.load(tmp_path / "f.npz")
    # NaN smuggled in as a JSON constant (json.dumps writes it unless allow_nan=False)
    entries = persistence.raw_entries(path)
    text = json.dumps(dict(meta, state=dict(meta["state"], intercept_=float("nan"))))
    assert "NaN" in text
    entries["__meta__"] = persistence._npy_bytes(np.frombuffer(text.encode(), dtype=np.uint8))
    persistence.forge(tmp_path / "c.npz", entries, json.loads(text))  # forge re-dumps: NaN again
    with pytest.raises(InputError, match=r"c.npz: corrupt metadata \(ValueError: NaN is not valid JSON"):
        rankwise.load(tmp_path / "c.npz")
    # a NaN intercept written as the __float__ form _encode uses: finite arrays, non-finite scores
    _rewrite_meta(path, tmp_path / "i.npz", state=dict(meta["state"], intercept_={"__float__": "nan"}))
    with pytest.raises(InputError, match=r"i.npz: corrupt or not a rankwise LinearRanker file \(its scores on a probe "
                                         r"input are \[nan, nan\]"):
        rankwise.load(tmp_path / "i.npz")


def test_wrong_shape_arrays_in_a_neural_model_are_refused_at_load(tmp_path):
    m, path, X = _fitted(tmp_path, lambda: NeuralRanker("listnet", hidden=(8,), epochs=1, random_state=0))
    _set_array(path, tmp_path / "s.npz", "scaler_mean_", np.zeros(3, dtype=m.scaler_mean_.dtype))
    with pytest.raises(InputError, match=r"s.npz: corrupt or not a rankwise NeuralRanker file \(predicting on a probe "
                                         r"input failed\) \((RuntimeError|ValueError)"):
        rankwise.load(tmp_path / "s.npz")
    w = persistence._array(path, "module/net.0.weight", persistence.raw_entries(path)["module/net.0.weight"])
    _set_array(path, tmp_path / "w.npz", "module/net.0.weight", w[:, :3])
    with pytest.raises(InputError, match=r"w.npz: corrupt or not a rankwise model file \(RuntimeError: .*size mismatch"):
        rankwise.load(tmp_path / "w.npz")


def test_zip_level_tricks_are_refused(tmp_path):
    m, path, X = _fitted(tmp_path)
    entries = persistence.raw_entries(path)
    with zipfile.ZipFile(tmp_path / "deflated.npz", "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for k, v in entries.items():
            zf.writestr(k + ".npy", v)
    with pytest.raises(InputError, match=r"deflated.npz: not a rankwise model file \(entry '\w+.npy' is not a stored .npy array"):
        rankwise.load(tmp_path / "deflated.npz")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name
        with zipfile.ZipFile(tmp_path / "dup.npz", "w") as zf:
            for k, v in entries.items():
                zf.writestr(k + ".npy", v)
            zf.writestr("coef_.npy", persistence._npy_bytes(np.full_like(m.coef_, np.nan)))
    with pytest.raises(InputError, match=r"dup.npz: corrupt model file \(an entry appears twice"):
        rankwise.load(tmp_path / "dup.npz")
    with zipfile.ZipFile(tmp_path / "extra.npz", "w") as zf:
        for k, v in entries.items():
            zf.writestr(k + ".npy", v)
        zf.writestr("extra.npy", persistence._npy_bytes(np.zeros(2)))
    with pytest.raises(InputError, match=r"extra.npz: integrity check failed: the arrays in the file and the digests"):
        rankwise.load(tmp_path / "extra.npz")


def test_format_1_files_still_load(tmp_path):
    m, path, X = _fitted(tmp_path)
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files if k != "__digest__"}
    meta = json.loads(arrays.pop("__meta__").tobytes())
    meta["format_version"] = 1
    meta.pop("digests")
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(tmp_path / "v1.npz", "wb") as fh:
        np.savez(fh, **arrays)
    np.testing.assert_array_equal(rankwise.load(tmp_path / "v1.npz").predict(X), m.predict(X))
    arrays["coef_"] = np.full_like(m.coef_, np.nan)  # no digest, but the values are still checked
    with open(tmp_path / "v1nan.npz", "wb") as fh:
        np.savez(fh, **arrays)
    with pytest.raises(InputError, match=r"entry 'coef_' holds NaN"):
        rankwise.load(tmp_path / "v1nan.npz")


def test_same_model_same_bytes(tmp_path):
    m, path, X = _fitted(tmp_path)
    again = m.save(tmp_path / "again.npz")
    assert path.read_bytes() == again.read_bytes()


def test_untrusted_load_runs_the_checks_in_a_child(tmp_path):
    m, path, X = _fitted(tmp_path, lambda: GBDTRanker("native:lambdarank", n_estimators=3, min_child_samples=5,
                                                      random_state=0))
    loaded = rankwise.load(path, untrusted=True)
    np.testing.assert_array_equal(loaded.predict(X), m.predict(X))
    entries = persistence.raw_entries(path)
    text = persistence.array_to_text(persistence._array(path, "booster", entries["booster"]))
    entries["booster"] = persistence._npy_bytes(persistence.text_to_array(text[: len(text) // 2]))
    persistence.forge(tmp_path / "cut.npz", entries)
    with pytest.raises(InputError, match=r"cut.npz: corrupt or not a rankwise model file \(BoosterTextError: booster "
                                         r"text, end: no 'end of trees' line"):
        rankwise.load(tmp_path / "cut.npz", untrusted=True)


@pytest.mark.parametrize("script,timeout,message", [
    ("kill -SEGV $$", 60, r"m.npz: the file crashed the model library in a child process \(SIGSEGV\); it is corrupt "
                          "or hostile and was not loaded"),
    ("kill -ABRT $$", 60, r"\(SIGABRT\)"),
    ("sleep 30", 1, r"m.npz: checking the file in a child process did not finish in 1 s"),
    ("echo boom >&2; exit 1", 60, r"the child process checking the file failed \(exit code 1: boom\)"),
])
def test_untrusted_load_survives_a_child_that_crashes_or_hangs(tmp_path, monkeypatch, script, timeout, message):
    """The child's fate is reported as an InputError: a stand-in interpreter plays the library
    that dies by a signal, loops forever, or fails."""
    m, path, X = _fitted(tmp_path)
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\ncat > /dev/null\n{script}\n")
    fake.chmod(0o755)
    monkeypatch.setattr(persistence.sys, "executable", str(fake))
    with pytest.raises(InputError, match=message):
        rankwise.load(path, untrusted=True, timeout=timeout)


def test_save_errors_name_the_file_not_the_temporary(tmp_path):
    m, path, X = _fitted(tmp_path)
    with pytest.raises(InputError, match=r"cannot save to .*: it is a directory"):
        m.save(tmp_path)
    if not __import__("os").path.isdir("/proc/self"):
        pytest.skip("needs /proc (a folder nobody can create files in, even root)")
    with pytest.raises(InputError, match=r"cannot save to /proc/m.npz: ") as info:
        m.save("/proc/m.npz")
    assert ".tmp" not in str(info.value)


def test_feature_names_of_the_training_data_are_saved(tmp_path):
    """A data set's feature_names (a feature log's) name the columns after save/load: exports use them."""
    from rankwise.data import RankingDataset

    X, y, qid = make_data(n_queries=10, list_len=5)
    names = [f"feat {j} ü" for j in range(X.shape[1])]
    ds = RankingDataset.from_arrays(X, y, qid, feature_names=names)
    model = LinearRanker(max_iter=5).fit(ds)
    assert model.feature_names_ == names and not hasattr(model, "feature_names_in_")
    path = model.save(tmp_path / "m.npz")
    assert rankwise.load(path).feature_names_ == names
    unnamed = LinearRanker(max_iter=5).fit(X, y, qid=qid)
    assert not hasattr(unnamed, "feature_names_")
    assert not hasattr(rankwise.load(unnamed.save(tmp_path / "u.npz")), "feature_names_")
    model.fit(X, y, qid=qid)  # refitted on unnamed columns: the old names go
    assert not hasattr(model, "feature_names_")
    _rewrite_meta(path, tmp_path / "bad.npz", feature_names=names[:-1])
    with pytest.raises(InputError, match=r"bad.npz: corrupt .*feature_names is not a list of \d+ strings"):
        rankwise.load(tmp_path / "bad.npz")
