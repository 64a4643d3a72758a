"""Data-parallel training with a real 2-process torch.distributed gloo group on this machine."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (DDP training needs it; Dask it does not)")

from rankwise.data import RankingDataset, concat, make_synthetic, read_svmlight, write_svmlight  # noqa: E402
from rankwise.distributed import fit_ddp, fit_shard  # noqa: E402
from rankwise.distributed.ddp import _check_disjoint, shard_bounds  # noqa: E402
from rankwise.errors import InputError  # noqa: E402
from rankwise.metrics import evaluate  # noqa: E402
from rankwise.models import LinearRanker, NeuralRanker  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
import distributed_reference as ref  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return make_synthetic(50, n_features=6, list_length=(1, 20), seed=3)


def test_shard_bounds_are_contiguous_whole_queries_covering_everything():
    rng = np.random.default_rng(0)
    for n_q, w in [(7, 2), (10, 3), (2, 2), (40, 4)]:
        offsets = np.concatenate(([0], np.cumsum(rng.integers(1, 30, size=n_q))))
        cuts = shard_bounds(offsets, w)
        assert cuts[0] == 0 and cuts[-1] == n_q and len(cuts) == w + 1
        assert np.all(np.diff(cuts) >= 1)  # every rank gets at least one whole query
    with pytest.raises(InputError, match="world_size=3 is larger than the number of queries"):
        shard_bounds(np.array([0, 2, 5]), 3)


def test_split_query_across_ranks_is_refused():
    _check_disjoint([np.array([1, 2, 3]), np.array([4, 5])])
    with pytest.raises(InputError, match=r"query id 3 appears on ranks 0 and 1"):
        _check_disjoint([np.array([1, 2, 3]), np.array([3, 5])])
    with pytest.raises(InputError, match=r"query id 'b' appears on ranks 1 and 2"):
        _check_disjoint([np.array(["a"]), np.array(["b"]), np.array(["b", "c"])])


@pytest.mark.parametrize("solver,loss", [("adam", "listnet"), ("ogd", "pointwise_squared")])
def test_linear_ddp_equals_single_process(data, solver, loss):
    # fit_intercept=False: every parameter has an informative gradient (see the intercept test below)
    kw = dict(loss=loss, solver=solver, max_iter=4, batch_queries=7, random_state=0, verbose=False,
              fit_intercept=False, alpha=1e-3)
    single = LinearRanker(**kw).fit(data.X, data.labels, qid=data.qid)
    dist = fit_ddp(LinearRanker(**kw), data.X, data.labels, qid=data.qid, world_size=2)
    # stated tolerance: float32 gradients summed in another order (gloo allreduce of two halves)
    np.testing.assert_allclose(dist.coef_, single.coef_, rtol=0, atol=1e-5)
    assert np.abs(single.coef_).max() > 1e-2  # weights moved away from the zero init
    np.testing.assert_allclose(dist.history_["loss"], single.history_["loss"], rtol=1e-5)
    np.testing.assert_allclose(dist.scaler_mean_, single.scaler_mean_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(dist.scaler_scale_, single.scaler_scale_, rtol=1e-12)


def test_spawned_ranks_equal_single_process_too(data, monkeypatch):
    """The start method of platforms without a fork server (Windows): fresh interpreters per rank."""
    import rankwise.distributed.ddp as ddp

    monkeypatch.setattr(ddp, "_start_method", lambda: "spawn")
    kw = dict(loss="listnet", solver="adam", max_iter=4, batch_queries=7, random_state=0, verbose=False,
              fit_intercept=False, alpha=1e-3)
    single = LinearRanker(**kw).fit(data.X, data.labels, qid=data.qid)
    dist = fit_ddp(LinearRanker(**kw), data.X, data.labels, qid=data.qid, world_size=2)
    np.testing.assert_allclose(dist.coef_, single.coef_, rtol=0, atol=1e-5)
    np.testing.assert_allclose(dist.history_["loss"], single.history_["loss"], rtol=1e-5)


def test_the_fork_server_preloads_the_ranks_only_when_rankwise_starts_it(monkeypatch):
    import multiprocessing
    import multiprocessing.forkserver as fs

    import rankwise.distributed.ddp as ddp

    if "forkserver" not in multiprocessing.get_all_start_methods():
        monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
        assert ddp._start_method() == "spawn"
        return
    fresh = fs.ForkServer()  # not running yet: rankwise sets what it loads
    monkeypatch.setattr(fs, "_forkserver", fresh)
    monkeypatch.setattr(multiprocessing, "set_forkserver_preload", fresh.set_forkserver_preload)
    assert ddp._start_method() == "forkserver"
    assert fresh._preload_modules == ["__main__", "rankwise.distributed._rank_preload"]
    running = fs.ForkServer()  # started by the program itself: used as it is
    running._forkserver_pid = 12345
    running._preload_modules = ["__main__", "users_module"]
    monkeypatch.setattr(fs, "_forkserver", running)
    monkeypatch.setattr(multiprocessing, "set_forkserver_preload", running.set_forkserver_preload)
    assert ddp._start_method() == "forkserver"
    assert running._preload_modules == ["__main__", "users_module"]
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])  # Windows
    assert ddp._start_method() == "spawn"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts OS threads in /proc (Linux)")
def test_rank_preload_module_starts_no_thread_pool():
    """What the fork server loads before it forks the ranks: no thread beyond those the imports alone start
    (an OpenMP pool started before fork is unusable in the children); the first optimizer's imports done."""
    code = ("import os, sys, torch, torch.distributed, rankwise.models\n"
            "before = len(os.listdir('/proc/self/task'))\n"
            "import rankwise.distributed._rank_preload\n"
            "assert 'torch._dynamo' in sys.modules\n"
            "after = len(os.listdir('/proc/self/task'))\n"
            "torch.ones(300, 300) @ torch.ones(300, 300)  # a parallel region: the pool starts here\n"
            "print(before, after, len(os.listdir('/proc/self/task')))\n")
    env = dict(os.environ, OMP_NUM_THREADS="2", MKL_NUM_THREADS="2")  # make test sets both to 1: no pool at all
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    before, after, pooled = map(int, r.stdout.split())
    assert after == before
    assert pooled > after  # the count does see a pool when one starts


def test_listnet_gives_the_intercept_a_float_noise_gradient():
    """Why the intercept of a listnet LinearRanker is not reproducible (test below).

    ListNet is invariant to adding one constant to all scores of a list, so the exact gradient
    of a common offset is sum_i (softmax(s)_i - softmax(y)_i) = 1 - 1 = 0; in float32 it is
    rounding noise, while Adam divides every step by the gradient's running RMS: a noise
    gradient of ~1e-8 (against Adam's eps = 1e-8) still moves the intercept by up to ~lr per
    step, in a direction set by the summation order.
    """
    from rankwise.losses import listnet_loss

    gen = torch.Generator().manual_seed(0)
    s = torch.randn(8, 20, generator=gen, dtype=torch.float32)
    y = torch.randint(0, 5, (8, 20), generator=gen).to(torch.float32)
    where = torch.rand(8, 20, generator=gen) < 0.8
    where[:, :2] = True
    b = torch.zeros((), requires_grad=True)
    scores = (s + b).requires_grad_()
    scores.retain_grad()
    listnet_loss(scores, y, where=where, reduction="sum").backward()
    g_scores = scores.grad[where].abs().max().item()
    assert g_scores > 0.05  # the scores' gradient is informative ...
    assert abs(b.grad.item()) < 1e-5 * g_scores  # ... the offset's is 0 up to float32 rounding


def test_linear_ddp_default_intercept_matches_where_it_must(data):
    # LinearRanker's defaults: listnet, fit_intercept=True. The intercept is driven by float
    # noise (test above) and differs between runs whose sums are ordered differently; it does
    # not change any ranking. What must match: coef_, and scores up to one constant.
    kw = dict(solver="adam", max_iter=4, batch_queries=7, random_state=0, verbose=False)
    single = LinearRanker(**kw).fit(data.X, data.labels, qid=data.qid)
    dist = fit_ddp(LinearRanker(**kw), data.X, data.labels, qid=data.qid, world_size=2)
    assert single.fit_intercept and dist.fit_intercept
    np.testing.assert_allclose(dist.coef_, single.coef_, rtol=0, atol=1e-5)
    assert np.abs(single.coef_).max() > 1e-2
    p1, p2 = single.predict(data.X), dist.predict(data.X)
    np.testing.assert_allclose(p2 - dist.intercept_, p1 - single.intercept_, rtol=0, atol=1e-5)
    r1 = evaluate(p1, data.labels, data.qid, metrics=["ndcg@10", "map"]).per_query
    r2 = evaluate(p2, data.labels, data.qid, metrics=["ndcg@10", "map"]).per_query
    np.testing.assert_allclose(r2.to_numpy(), r1.to_numpy(), rtol=0, atol=1e-12)  # same rankings
    np.testing.assert_allclose(dist.history_["loss"], single.history_["loss"], rtol=1e-5)  # listnet ignores b


def test_neural_ddp_equals_single_process(data):
    kw = dict(loss="ranknet", hidden=(8,), max_iter=2, batch_queries=6, learning_rate=0.01, dropout=0.0, random_state=1,
              verbose=False)
    single = NeuralRanker(**kw).fit(data.X, data.labels, qid=data.qid)
    dist = fit_ddp(NeuralRanker(**kw), data.X, data.labels, qid=data.qid, world_size=2)
    a, b = single.module_.state_dict(), dist.module_.state_dict()
    last_bias = list(a)[-1]
    for k in a:
        if k == last_bias:
            # ranknet is shift-invariant: the output bias has an exactly-zero gradient, so Adam's
            # normalised step follows float noise there; it does not change any ranking
            continue
        np.testing.assert_allclose(b[k].numpy(), a[k].numpy(), rtol=0, atol=1e-5, err_msg=k)
    sa = single.predict(data.X) - float(a[last_bias])
    sb = dist.predict(data.X) - float(b[last_bias])
    np.testing.assert_allclose(sb, sa, rtol=0, atol=1e-4)


def test_ddp_refuses_what_it_cannot_do(data):
    with pytest.raises(InputError, match="solver='adam' or 'ogd'"):
        fit_ddp(LinearRanker(solver="lbfgs"), data.X, data.labels, qid=data.qid)
    with pytest.raises(InputError, match="world_size"):
        fit_ddp(LinearRanker(solver="adam"), data.X, data.labels, qid=data.qid, world_size=0)
    with pytest.raises(InputError, match="LinearRanker or NeuralRanker"):
        fit_ddp(object(), data.X, data.labels, qid=data.qid)
    with pytest.raises(InputError, match="configured instance"):
        fit_ddp(LinearRanker, data.X, data.labels, qid=data.qid)
    with pytest.raises(InputError, match="larger than the number of queries"):
        fit_ddp(LinearRanker(solver="adam"), data.X[:5], data.labels[:5], qid=np.zeros(5), world_size=2)
    assert torch.distributed.is_gloo_available()


def test_fit_shard_needs_an_initialised_process_group(data):
    assert not torch.distributed.is_initialized()
    with pytest.raises(InputError, match="init_process_group"):
        fit_shard(LinearRanker(solver="adam"), data.X, data.labels, qid=data.qid)


@pytest.mark.parametrize("sparse", [False, True])
def test_global_standardisation_equals_the_definition(monkeypatch, tmp_path, sparse):
    import scipy.sparse as sp
    import torch.distributed as tdist

    from rankwise.distributed import ddp
    from rankwise.distributed.ddp import _global_standardizer

    rng = np.random.default_rng(0)
    X = rng.normal(3.0, 2.0, size=(50, 4)).astype(np.float32)
    X[:, 2] = 7.0  # constant column: scale 1 (dense), root mean square 7 (sparse)
    X[rng.random(X.shape) < 0.3] = 0.0
    monkeypatch.setattr(ddp, "_CHUNK", 7)  # several row chunks
    tdist.init_process_group("gloo", init_method=(tmp_path / "rendezvous").as_uri(), rank=0, world_size=1)
    try:
        got_mean, got_scale = _global_standardizer(sp.csr_matrix(X) if sparse else X, True, None)
    finally:
        tdist.destroy_process_group()
    mean, scale = ref.standardization_stats(X.astype(np.float64).tolist(), sparse=sparse)
    np.testing.assert_allclose(got_mean, mean, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got_scale, scale, rtol=1e-12)


# --------------------------------------------------------------------------- torchrun, one shard file per rank

def _torchrun(*args, timeout=300):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "rankwise.distributed.ddp", "train", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def test_module_cli_help_runs_without_a_double_import():
    r = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "rankwise.distributed.ddp", "train",
                        "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "torchrun" in r.stdout and "{rank}" in r.stdout


def test_torchrun_ranks_reading_own_shards_equal_single_process_on_the_concatenation(tmp_path):
    import rankwise

    ds = make_synthetic(50, n_features=6, list_length=(2, 20), seed=3)
    X = np.asarray(ds.X).copy()
    X[:ds.query_offsets[20], 5] = 0.0  # feature 6 is 0 on every row of shard 0 ...
    ds = RankingDataset(X, ds.labels, ds.query_offsets, ds.query_ids)
    # unequal shards: 20 and 30 queries; shard 0 is edited below, so without the rankwise trailer (its digest)
    write_svmlight(ds.take(np.arange(0, 20)), tmp_path / "shard_0.txt", trailer=False)
    write_svmlight(ds.take(np.arange(20, 50)), tmp_path / "shard_1.txt")
    text = (tmp_path / "shard_0.txt").read_text()
    (tmp_path / "shard_0.txt").write_text(re.sub(r" 6:\S+", "", text))  # ... and not written (SVMlight omits zeros)
    params = dict(solver="adam", max_iter=3, batch_queries=7, alpha=1e-3, fit_intercept=False)
    r = _torchrun("--data", str(tmp_path / "shard_{rank}.txt"), "--params", json.dumps(params),
                  "--random-state", "0", "--timeout", "120", "--out", str(tmp_path / "model.rw"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rank 0: fitted LinearRanker('listnet') on 2 ranks, 50 queries" in r.stdout
    got = rankwise.load(tmp_path / "model.rw")
    shards = [read_svmlight(tmp_path / f"shard_{i}.txt", dense=True) for i in (0, 1)]
    assert shards[0].n_features == 5 and shards[1].n_features == 6  # the CLI pads rank 0 to 6
    whole = concat([read_svmlight(tmp_path / f"shard_{i}.txt", dense=True, n_features=6) for i in (0, 1)])
    single = LinearRanker("listnet", random_state=0, verbose=False, **params).fit(whole)
    # statistics combined with all_reduce: equal to the single-process ones up to float64 rounding
    np.testing.assert_allclose(got.scaler_mean_, single.scaler_mean_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.scaler_scale_, single.scaler_scale_, rtol=1e-12)
    np.testing.assert_allclose(got.coef_, single.coef_, rtol=0, atol=1e-5)
    assert np.abs(single.coef_).max() > 1e-2
    np.testing.assert_allclose(got.history_["loss"], single.history_["loss"], rtol=1e-5)


_MISMATCH_SCRIPT = """
import os
import sys

import numpy as np
import scipy.sparse as sp
import torch.distributed as dist
from rankwise.data import make_synthetic
from rankwise.distributed.ddp import fit_shard
from rankwise.errors import InputError
from rankwise.models import LinearRanker

dist.init_process_group("gloo")
r = dist.get_rank()
ds = make_synthetic(20, n_features=4, list_length=(2, 6), seed=r)
X, y, own_qid = np.asarray(ds.X), ds.labels, ds.qid + 1000 * r
out = []
for model, Xr, q in [
        (LinearRanker(solver="adam", max_iter=1, learning_rate=0.01 if r == 0 else 0.1), X, own_qid),  # params differ
        (LinearRanker(solver="adam", max_iter=1), X, ds.qid),                 # the same query ids on both ranks
        (LinearRanker(solver="adam", max_iter=1), sp.csr_matrix(X) if r else X, own_qid),   # sparse on rank 1
        (LinearRanker(solver="adam", max_iter=1), X, own_qid)]:               # fine: the group is still usable
    try:
        fit_shard(model, Xr, y, qid=q)
        out.append("fitted")
    except InputError as exc:
        out.append(str(exc))
# a file per rank: two processes printing long lines to torchrun's one stdout can interleave them
with open(os.path.join(sys.argv[1], f"rank{r}.txt"), "w") as fh:
    fh.write(f"RANK{r}|" + "|".join(out))
dist.destroy_process_group()
"""


def test_fit_shard_mismatches_between_ranks_raise_on_every_rank(tmp_path):
    script = tmp_path / "mismatch.py"
    script.write_text(_MISMATCH_SCRIPT)
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                        str(script), str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    found = [(tmp_path / f"rank{k}.txt").read_text() for k in (0, 1) if (tmp_path / f"rank{k}.txt").exists()]
    lines = {ln.split("|")[0]: ln.split("|")[1:] for ln in found}
    assert set(lines) == {"RANK0", "RANK1"}
    for rank, out in lines.items():
        assert "the model parameter 'learning_rate' differs between ranks (rank 0: 0.01, rank 1: 0.1)" in out[0], rank
        assert "appears on ranks 0 and 1: a query must live on exactly one rank" in out[1], rank
        assert "X is sparse differs between ranks (rank 0: False, rank 1: True)" in out[2], rank
        assert out[3] == "fitted", rank


def test_torchrun_one_rank_failing_stops_every_rank_with_a_clear_error(tmp_path):
    ds = make_synthetic(10, n_features=4, list_length=(2, 5), seed=1)
    write_svmlight(ds, tmp_path / "shard_0.txt")  # shard_1.txt is missing
    r = _torchrun("--data", str(tmp_path / "shard_{rank}.txt"), "--timeout", "60", "--out",
                  str(tmp_path / "model.rw"), timeout=240)
    assert r.returncode != 0
    assert "rank 1: error: --data: no file" in r.stderr
    assert "rank 0: error: rank 1 failed: InputError: --data: no file" in r.stderr  # not a collective timeout
    assert not (tmp_path / "model.rw").exists()
