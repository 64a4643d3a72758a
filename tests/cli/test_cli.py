"""The command line: main(argv) for every command, one subprocess smoke test per command, and an
end-to-end run on MQ2008 whose numbers must equal the Python API's."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from rankwise.cli import main
from rankwise.data import RankingDataset, make_synthetic, read_svmlight, write_svmlight, write_trec_qrels, write_trec_run

COMMANDS = ["train", "predict", "evaluate", "compare", "report", "fetch", "demo", "theory", "bench"]


def run_cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def small_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    full = make_synthetic(60, n_features=8, list_length=(4, 15), seed=3)
    train, test = full.take(np.arange(40)), full.take(np.arange(40, 60))
    write_svmlight(train, d / "train.txt")
    write_svmlight(test, d / "test.txt")
    return d


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command, capsys):
    code, out, _ = run_cli(capsys, command, "--help")
    assert code == 0 and "usage: rankwise " + command in out


def test_no_command_prints_help(capsys):
    code, out, _ = run_cli(capsys)
    assert code == 2 and "COMMAND" in out


def test_train_predict_evaluate_main(small_files, capsys, tmp_path):
    model = tmp_path / "m.npz"
    code, out, err = run_cli(capsys, "train", str(small_files / "train.txt"), "--valid", str(small_files / "test.txt"),
                             "--model", "linear", "--loss", "listnet", "--param", "max_iter=50", "--out", str(model))
    assert code == 0, err
    assert "validation ndcg@10" in out and model.exists()
    assert "best validation point: iteration" in out  # the validation curve's best point
    scores = tmp_path / "scores.txt"
    code, out, err = run_cli(capsys, "predict", str(model), str(small_files / "test.txt"), "--out", str(scores))
    assert code == 0, err
    code, out, err = run_cli(capsys, "evaluate", str(small_files / "test.txt"), "--scores", str(scores),
                             "--metrics", "ndcg@10,map", "--per-query", str(tmp_path / "pq.csv"))
    assert code == 0, err
    import rankwise
    from rankwise.metrics import evaluate

    test = read_svmlight(small_files / "test.txt")
    api = evaluate(rankwise.load(model).predict(test.X), test.labels, test.qid, metrics=["ndcg@10", "map"])
    printed = dict(line.split() for line in out.splitlines() if line.startswith(("ndcg@10", "map")))
    for m in ("ndcg@10", "map"):
        assert float(printed[m]) == pytest.approx(api.mean[m], abs=5e-7)
    import pandas as pd

    pq = pd.read_csv(tmp_path / "pq.csv")
    assert len(pq) == test.n_queries


@pytest.mark.parametrize("kind,extra", [("gbdt", ["--loss", "ranknet", "--param", "n_estimators=5"]),
                                        ("reduction", ["--param", "classifier=logistic"]),
                                        ("structured", ["--loss", "ndcg@5", "--param", "n_epochs=2"])])
def test_train_other_models(small_files, capsys, tmp_path, kind, extra):
    code, _, err = run_cli(capsys, "train", str(small_files / "train.txt"), "--model", kind, *extra,
                           "--out", str(tmp_path / "m.npz"))
    assert code == 0, err


def _runs_and_qrels(tmp_path):
    """Two runs over 30 queries, with unjudged retrieved documents and judged unretrieved ones."""
    rng = np.random.default_rng(7)
    qrels, runs = {}, [{}, {}]
    for q in range(30):
        docs = [f"d{q}_{i}" for i in range(12)]
        qrels[f"q{q}"] = {d: int(rng.integers(0, 3)) for d in docs[:9]}  # d9..d11 unjudged
        for r, run in enumerate(runs):
            retrieved = rng.choice(docs, size=8, replace=False)  # some judged docs never retrieved
            base = rng.normal(size=8) + r * np.array([qrels[f"q{q}"].get(d, 0) for d in retrieved])
            run[f"q{q}"] = {d: float(np.round(s, 1)) for d, s in zip(retrieved, base)}
    write_trec_qrels(qrels, tmp_path / "qrels")
    for r, run in enumerate(runs):
        write_trec_run(run, tmp_path / f"run{r}")
    return qrels, runs


def test_evaluate_run_equals_pytrec_eval(tmp_path, capsys):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, runs = _runs_and_qrels(tmp_path)
    code, out, err = run_cli(capsys, "evaluate", "--run", str(tmp_path / "run1"), "--qrels", str(tmp_path / "qrels"),
                             "--metrics", "ndcg,ndcg@5,map,P@5,recall@10,mrr", "--profile", "trec_eval")
    assert code == 0, err
    printed = dict(line.split() for line in out.splitlines() if line and not line.startswith("queries"))
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg", "ndcg_cut.5", "map", "P.5", "recall.10", "recip_rank"})
    per = ev.evaluate(runs[1])
    ref = {"ndcg": "ndcg", "ndcg@5": "ndcg_cut_5", "map": "map", "P@5": "P_5", "recall@10": "recall_10",
           "mrr": "recip_rank"}
    for ours, theirs in ref.items():
        expected = np.mean([per[q][theirs] for q in per])
        assert float(printed[ours]) == pytest.approx(expected, abs=1e-6), ours


def test_compare_and_report(tmp_path, capsys):
    _runs_and_qrels(tmp_path)
    runs = [str(tmp_path / "run0"), str(tmp_path / "run1")]
    code, out, err = run_cli(capsys, "compare", *runs, "--qrels", str(tmp_path / "qrels"), "--metrics", "ndcg@10,map",
                             "--names", "weak,strong", "--resamples", "500")
    assert code == 0, err
    for column in ("p_ttest_holm", "p_randomization_holm", "wins", "ties", "losses", "weak", "strong"):
        assert column in out, column
    # a model's training history becomes the learning-curve plot; auc (no cut-off) as first metric
    model = tmp_path / "m.npz"
    data = make_synthetic(30, n_features=5, list_length=(4, 10), seed=1)
    from rankwise.models import LinearRanker

    LinearRanker(loss="listnet", solver="adam", max_iter=4, random_state=0).fit(
        data, eval_set=data).save(model)
    code, out, err = run_cli(capsys, "report", *runs, "--qrels", str(tmp_path / "qrels"), "--metrics", "auc,ndcg@10",
                             "--resamples", "500", "--out", str(tmp_path / "rep"), "--model", str(model))
    assert code == 0, err
    md = (tmp_path / "rep" / "report.md").read_text()
    for png in ("metric_at_k.png", "per_query_difference.png", "learning_curves.png"):
        assert png in md
        assert (tmp_path / "rep" / png).read_bytes()[:4] == b"\x89PNG"
    assert "## Means" in md and "auc" in md


@pytest.mark.parametrize("argv,needle", [
    (["evaluate", "--run", "nope.run", "--qrels", "nope.qrels"], "nope"),
    (["train", "missing.txt", "--out", "m.npz"], "missing.txt"),
    (["evaluate", "--metrics", "ndcg@10"], "--run RUN --qrels QRELS"),
    (["theory"], "sub-command"),
    (["train", "missing.txt", "--loss", "no_such_loss", "--out", "m.npz"], "no_such_loss"),  # before loading
    (["train", "missing.txt", "--out", "no/such/dir/m.npz"], "does not exist"),  # before loading
    (["train", "missing.txt", "--model", "reduction", "--param", "classifier=forest", "--out", "m.npz"],
     "classifier must be one of"),
])
def test_user_errors_exit_2_with_one_line(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert err.startswith("rankwise: error:") and needle in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_bad_param_and_bad_line(small_files, capsys, tmp_path):
    code, _, err = run_cli(capsys, "train", str(small_files / "train.txt"), "--param", "no_such=1",
                           "--out", str(tmp_path / "m.npz"))
    assert code == 2 and "no_such" in err
    bad = tmp_path / "bad.txt"
    bad.write_text("1 qid:1 1:0.5\nx qid:1 1:0.2\n")
    code, _, err = run_cli(capsys, "train", str(bad), "--out", str(tmp_path / "m.npz"))
    assert code == 2 and f"{bad}:2" in err


def test_run_queries_must_overlap_the_qrels_and_complete_scores_missing_ones(tmp_path, capsys):
    qrels = {"q1": {"a": 1, "b": 0}, "q2": {"c": 2, "d": 0}}
    write_trec_qrels(qrels, tmp_path / "qrels")
    write_trec_run({"X1": {"a": 1.0}}, tmp_path / "bad.run")
    code, _, err = run_cli(capsys, "evaluate", "--run", str(tmp_path / "bad.run"), "--qrels", str(tmp_path / "qrels"))
    assert code == 2 and "no query id in common" in err
    write_trec_run({"q1": {"a": 2.0, "b": 1.0}, "q9": {"z": 1.0}}, tmp_path / "part.run")
    args = ["evaluate", "--run", str(tmp_path / "part.run"), "--qrels", str(tmp_path / "qrels"), "--metrics", "ndcg"]
    code, out, err = run_cli(capsys, *args)
    assert code == 0 and "1 run queries have no judgments" in err and "1 judged queries are not in the run" in err
    assert dict(line.split() for line in out.splitlines())["ndcg"] == "1.000000"  # only q1, ranked perfectly
    code, out, err = run_cli(capsys, *args, "--complete")
    assert code == 0 and dict(line.split() for line in out.splitlines())["ndcg"] == "0.500000"  # q2 scores 0


def test_debug_after_the_subcommand_shows_the_traceback(capsys, tmp_path):
    from rankwise.errors import RankwiseError

    with pytest.raises((OSError, RankwiseError)):  # re-raised, not turned into exit code 2
        main(["evaluate", "--run", str(tmp_path / "none"), "--qrels", str(tmp_path / "none"), "--debug"])


def test_fetch_offline_message_and_cache_hit(capsys, tmp_path, monkeypatch, data_dir):
    monkeypatch.setenv("RANKWISE_DATA", str(data_dir))
    code, out, err = run_cli(capsys, "fetch", "mq2008")
    assert code == 0, err
    assert "MQ2008" in out
    monkeypatch.delenv("RANKWISE_DATA")
    code, out, err = run_cli(capsys, "fetch", "mslr-web10k", "--cache-dir", str(tmp_path / "cache"))
    assert code == 2 and "mslr" in err.lower()


def test_theory_commands(capsys):
    code, out, err = run_cli(capsys, "theory", "calibration", "--loss", "pairwise_hinge", "--metric", "dcg")
    assert code == 0, err
    assert "not calibrated" in out.lower() and "counterexample" in out.lower()
    code, out, err = run_cli(capsys, "theory", "losses")
    assert code == 0 and "listnet" in out
    code, out, err = run_cli(capsys, "theory", "lipschitz", "--loss", "listnet", "--lengths", "5,50")
    assert code == 0 and len(out.splitlines()) == 3 and "nan" not in out.lower()


SMOKE = {
    "train": lambda d, t: ["train", str(d / "train.txt"), "--model", "linear", "--loss", "ranknet",
                           "--param", "max_iter=20", "--out", str(t / "m.npz")],
    "predict": lambda d, t: ["predict", str(t / "m.npz"), str(d / "test.txt"), "--trec", "--out", str(t / "run")],
    "evaluate": lambda d, t: ["evaluate", str(d / "test.txt"), "--scores", str(t / "scores")],
    "compare": lambda d, t: ["compare", str(t / "run"), str(t / "run"), "--qrels", str(t / "qrels"),
                             "--names", "a,b", "--resamples", "100"],
    "report": lambda d, t: ["report", str(t / "run"), "--qrels", str(t / "qrels"), "--out", str(t / "rep")],
    "fetch": lambda d, t: ["fetch", "mq2008", "--cache-dir", str(t / "nocache")],
    "theory": lambda d, t: ["theory", "losses"],
    "bench": lambda d, t: ["bench", "--only", "no_such_bench"],
    "demo": lambda d, t: ["demo", "--queries", "40"],
}


def test_subprocess_smoke_every_command(small_files, tmp_path):
    """One real `rankwise` process per command."""
    test = read_svmlight(small_files / "test.txt")
    (tmp_path / "scores").write_text("".join(f"{v}\n" for v in np.linspace(0, 1, len(test))))
    write_trec_qrels({str(q.qid): {f"{q.qid}_{i}": int(l) for i, l in enumerate(q.labels)} for q in test},
                     tmp_path / "qrels")
    env = dict(os.environ)
    env.pop("RANKWISE_DATA", None)
    # fetch: no cache, no network: a clear error, exit 2; bench: an unknown benchmark name, exit 2
    expected = {"fetch": 2, "bench": 2}
    for command, argv in SMOKE.items():
        proc = subprocess.run([sys.executable, "-m", "rankwise", *argv(small_files, tmp_path)],
                              capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == expected.get(command, 0), (command, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr, command
        if command == "demo":
            assert "Test metrics" in proc.stdout and "oracle" in proc.stdout
        if command == "bench":
            assert "unknown benchmark" in proc.stderr


@pytest.mark.realdata
def test_end_to_end_mq2008_cli_equals_api(mq2008_dir, tmp_path, capsys):
    train, test = mq2008_dir / "Fold1" / "train.txt.gz", mq2008_dir / "Fold1" / "test.txt.gz"
    model = tmp_path / "m.npz"
    assert main(["train", str(train), "--model", "linear", "--loss", "listnet", "--param", "max_iter=100",
                 "--out", str(model)]) == 0
    assert main(["predict", str(model), str(test), "--out", str(tmp_path / "s")]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(test), "--scores", str(tmp_path / "s"), "--metrics", "ndcg@10,map,err@10"]) == 0
    out = capsys.readouterr().out
    printed = dict(line.split() for line in out.splitlines() if line.split()[0] in ("ndcg@10", "map", "err@10"))
    from rankwise.metrics import evaluate
    from rankwise.models import LinearRanker

    ds_train, ds_test = read_svmlight(train), read_svmlight(test)
    api_model = LinearRanker(loss="listnet", max_iter=100, random_state=0).fit(ds_train)
    api = evaluate(api_model.predict(ds_test.X), ds_test.labels, ds_test.qid, metrics=["ndcg@10", "map", "err@10"])
    for m in ("ndcg@10", "map", "err@10"):
        assert float(printed[m]) == pytest.approx(api.mean[m], abs=5e-7), m


# -- checks that need no data run before the data is read (issue 17) ---------------------------
@pytest.fixture
def reading_forbidden(monkeypatch):
    """Any attempt to read a data set fails the test: the error must come first."""
    import rankwise.cli.inputs as inputs

    def boom(*a, **k):
        raise AssertionError("the data was read before the argument check")

    monkeypatch.setattr(inputs, "load_dataset", boom)


@pytest.mark.parametrize("argv,needle", [
    (["--param", "max_iter=-3"], "max_iter must be an integer >= 1; got -3"),
    (["--param", "alpha=abc"], "alpha must be a finite number >= 0; got 'abc'"),
    (["--model", "gbdt", "--param", "n_estimators=0"], "n_estimators must be an integer >= 1; got 0"),
    (["--model", "neural", "--param", "max_iter=0"], "NeuralRanker: max_iter must be an integer >= 1; got 0"),
    (["--model", "structured", "--param", "max_iter=0"], "StructuredHingeRanker: max_iter must be an integer >= 1; got 0"),
    (["--model", "reduction", "--param", "batch_size=0"], "batch_size must be an integer >= 1; got 0"),
])
def test_bad_params_are_found_before_the_data_is_read(small_files, capsys, tmp_path, reading_forbidden, argv, needle):
    code, _, err = run_cli(capsys, "train", str(small_files / "train.txt"), *argv, "--out", str(tmp_path / "m.npz"))
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_unwritable_out_is_found_before_the_data_is_read(small_files, capsys, tmp_path, reading_forbidden):
    code, _, err = run_cli(capsys, "train", str(small_files / "train.txt"), "--out", str(tmp_path))
    assert code == 2 and "is a directory; give a file name" in err
    if os.path.isdir("/proc/self"):  # a folder where even root cannot create a file
        code, _, err = run_cli(capsys, "train", str(small_files / "train.txt"), "--out", "/proc/m.npz")
        assert code == 2 and "--out /proc/m.npz: cannot write in /proc" in err and ".tmp" not in err, err
    if os.geteuid() != 0:  # root writes into read-only folders
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        try:
            code, _, err = run_cli(capsys, "train", str(small_files / "train.txt"), "--out", str(ro / "m.npz"))
            assert code == 2 and "cannot write in" in err and ".tmp" not in err, err
        finally:
            ro.chmod(0o700)
    code, _, err = run_cli(capsys, "predict", "no_model.npz", str(small_files / "test.txt"), "--out", "/proc/s.txt")
    assert code == 2 and "cannot write in /proc" in err


def test_a_model_save_error_never_names_the_temporary_file(small_files, capsys, tmp_path, monkeypatch):
    """If the folder becomes unwritable during training, the error names --out, not m.npz.tmp."""
    cli = sys.modules["rankwise.cli.main"]  # the package re-exports main(), which shadows the module name
    monkeypatch.setattr(cli, "_check_writable", lambda folder, what: None)  # let the run reach the save
    code, _, err = run_cli(capsys, "train", str(small_files / "train.txt"), "--param", "max_iter=2",
                           "--out", "/proc/m.npz")
    assert code == 2 and "cannot save to /proc/m.npz" in err and ".tmp" not in err, err


def test_fetch_with_a_file_as_cache_dir(capsys, tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    code, _, err = run_cli(capsys, "fetch", "mq2008", "--cache-dir", str(f))
    assert code == 2 and f"cache folder {f} is a file, not a folder" in err and "offline" not in err, err


@pytest.fixture(scope="module")
def heavy_tailed_file(tmp_path_factory):
    """MSLR-like raw features (log-normal columns, raw scales 1e-2..1e6; see tests/models/_model_data.py)
    as SVMlight written with float32's shortest round-trip decimals."""
    full = make_synthetic(40, n_features=136, seed=0).take(np.arange(25))  # tests/models' training part
    rng = np.random.default_rng(1)
    a, scale = rng.uniform(0.5, 3.0, 136), 10.0 ** rng.uniform(-2, 6, 136)
    X = (np.exp(a * full.X.astype(np.float64)) * scale).astype(np.float32)
    path = tmp_path_factory.mktemp("heavy") / "train.txt"
    write_svmlight(RankingDataset(X, full.labels, full.query_offsets, full.query_ids), path)
    return path


def test_train_refuses_to_save_an_untrained_model(heavy_tailed_file, capsys, tmp_path):
    """Issue 28, defect 4: L-BFGS on lambdarank stopped at w = 0 and the CLI saved the constant model."""
    out = tmp_path / "m.npz"
    argv = ["train", str(heavy_tailed_file), "--loss", "lambdarank", "--param", "solver=lbfgs", "--out", str(out)]
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and not out.exists()
    assert "came back untrained" in err and "--allow-untrained" in err
    code, _, err = run_cli(capsys, *argv, "--allow-untrained")
    assert code == 0 and out.exists(), err


def test_train_default_solver_trains_lambdarank(heavy_tailed_file, capsys, tmp_path):
    out = tmp_path / "m.npz"
    code, _, err = run_cli(capsys, "train", str(heavy_tailed_file), "--loss", "lambdarank", "--param", "max_iter=10",
                           "--out", str(out))
    assert code == 0, err
    import rankwise

    model = rankwise.load(out)
    assert model.solver_ == "adam" and np.abs(model.coef_).max() > 0


def test_predict_refuses_a_file_with_fewer_features_than_the_model(small_files, capsys, tmp_path):
    """Issue 28, defect 5: predict scored the features absent from the file as zeros and exited 0."""
    model = tmp_path / "m.npz"
    code, _, err = run_cli(capsys, "train", str(small_files / "train.txt"), "--param", "max_iter=5", "--out", str(model))
    assert code == 0, err
    test = read_svmlight(small_files / "test.txt")
    narrow = tmp_path / "narrow.txt"
    write_svmlight(RankingDataset(test.X[:, :5], test.labels, test.query_offsets, test.query_ids), narrow)
    scores = tmp_path / "s.txt"
    code, _, err = run_cli(capsys, "predict", str(model), str(narrow), "--out", str(scores))
    assert code == 2 and not scores.exists()
    assert "has 5 features" in err and "trained on 8" in err and "--pad-features" in err
    code, _, err = run_cli(capsys, "predict", str(model), str(narrow), "--out", str(scores), "--pad-features")
    assert code == 0, err
    import rankwise

    padded = np.hstack([test.X[:, :5], np.zeros((len(test.labels), 3), np.float32)])
    expected = rankwise.load(model).predict(padded)
    assert np.array_equal(np.loadtxt(scores), expected)
