"""Data-parallel training with a real 2-process torch.distributed gloo group on 127.0.0.1."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("dask.dataframe", reason="rankwise[dask] extra not installed")
import torch  # noqa: E402

from rankwise.data import make_synthetic  # noqa: E402
from rankwise.distributed import fit_ddp  # noqa: E402
from rankwise.distributed.ddp import shard_queries  # noqa: E402
from rankwise.errors import InputError  # noqa: E402
from rankwise.models import LinearRanker, NeuralRanker  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return make_synthetic(50, n_features=6, list_length=(1, 20), seed=3)


def test_shards_are_whole_queries_and_cover_everything():
    for n, w in [(7, 2), (10, 3), (1, 2)]:
        shards = [shard_queries(n, w, r) for r in range(w)]
        assert sorted(np.concatenate(shards).tolist()) == list(range(n))


@pytest.mark.parametrize("solver,loss", [("adam", "listnet"), ("ogd", "pointwise_squared")])
def test_linear_ddp_equals_single_process(data, solver, loss):
    kw = dict(loss=loss, solver=solver, max_iter=4, batch_queries=7, random_state=0, verbose=False,
              fit_intercept=False, alpha=1e-3)
    single = LinearRanker(**kw).fit(data.X, data.labels, qid=data.qid)
    dist = fit_ddp(LinearRanker(**kw), data.X, data.labels, qid=data.qid, world_size=2)
    # stated tolerance: float32 gradients summed in another order (gloo allreduce of two halves)
    np.testing.assert_allclose(dist.coef_, single.coef_, rtol=0, atol=1e-5)
    assert np.abs(single.coef_).max() > 1e-2  # weights moved away from the zero init
    np.testing.assert_allclose(dist.history_["loss"], single.history_["loss"], rtol=1e-5)


def test_neural_ddp_equals_single_process(data):
    kw = dict(loss="ranknet", hidden=(8,), epochs=2, batch_queries=6, lr=0.01, dropout=0.0, random_state=1,
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
    assert torch.distributed.is_gloo_available()
