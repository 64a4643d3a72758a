"""Shared fixtures: where the real data lives, and a skip with a clear message where it is absent."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]

# OpenMP threads that wait at a barrier sleep instead of spinning. `make test` runs two pytest workers on
# two cores, so a fit with n_jobs=2 (LightGBM's and XGBoost's OpenMP pools) has one thread sharing a core with
# the other worker: spinning, its partner burns the core the late thread needs and every parallel region of
# every boosting round waits a scheduler slice (measured: tests/models/test_resume_faults.py under -n 2, 228 s
# wall with the default policy, 59 s passive). Scheduling only: the results are the same bits. Set here, in
# every pytest process (xdist workers included) before any OpenMP runtime is loaded, and inherited by the
# subprocesses the tests start; an explicit setting in the environment wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# With pytest-xdist (`make test`: -n 2) the tests of a group run on one worker, so the work they share is done
# once instead of once per worker: ranx's numba functions, compiled on first use in a new environment (measured
# cold: tests/data/test_fusion.py 99 CPU s in one process, 148 under -n 2 with both workers compiling), the
# session fixtures of tests/export (GBDT and linear models fitted on MQ2008 Fold1) and the uninterrupted fits of
# tests/models/test_resume_faults.py (module fixture). Measured on tests/export, test_fusion.py, test_peers.py
# and test_resume_faults.py, ranx cold, -n 2, with the ranx and export groups: 260 CPU s ungrouped, 217 grouped.
# Every other test is a unit of its own, in collection order; the groups, the largest units, start first.
# (xdist's own --dist loadgroup cannot do this under pytest 9: it can no longer suffix the node ids.)
XDIST_GROUPS = {
    "ranx": ("tests/data/test_fusion.py::", "tests/metrics/test_peers.py::test_ranx_profile"),
    "export": ("tests/export/",),
    "resume": ("tests/models/test_resume_faults.py::",),
}


def pytest_xdist_make_scheduler(config, log):
    """xdist's default scheduling (--dist load), with the groups of XDIST_GROUPS as units."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return next((name for name, prefixes in XDIST_GROUPS.items() if nodeid.startswith(prefixes)), nodeid)

    return GroupScheduling(config, log)


def shared_data_dir() -> Path | None:
    env = os.environ.get("RANKWISE_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "data")
    for c in candidates:
        if c.is_dir():
            return c
    return None


@pytest.fixture(scope="session")
def data_dir() -> Path:
    d = shared_data_dir()
    if d is None:
        pytest.skip("real data absent: set RANKWISE_DATA or place the data sets in ../shared/data "
                    "(MQ2008/Fold1..5, lightgbm_lambdarank, ml-100k)")
    return d


@pytest.fixture(scope="session")
def mq2008_dir(data_dir) -> Path:
    d = data_dir / "MQ2008"
    if not (d / "Fold1" / "train.txt.gz").exists():
        pytest.skip(f"MQ2008 absent: expected {d}/Fold1..5/{{train,vali,test}}.txt.gz")
    return d


# -- XGBoost's trees walked by hand: the reference of GBDTRanker's double-precision XGBoost scores --------------
class XGBoostByHand:
    """A booster's trees read from its JSON dump (``get_dump``) and walked row by row in plain Python:
    XGBoost's rule (``float32(x) < t``, NaN to ``missing``, a categorical split sends the listed
    categories to ``yes``), the float32 leaf values, and the base margin from the booster's config. No
    rankwise code is involved. (gbtree boosters only: a DART tree's weight is not in the dump.)"""

    def __init__(self, booster, n_rounds=None):
        import json
        import math

        config = json.loads(booster.save_config())["learner"]
        assert config["gradient_booster"]["name"] == "gbtree", "by-hand XGBoost walks gbtree boosters only"
        per_round = int(config["gradient_booster"]["gbtree_model_param"].get("num_parallel_tree", "1"))
        dumps = booster.get_dump(dump_format="json")
        self.trees = []
        for text in dumps[: None if n_rounds is None else n_rounds * per_round]:
            nodes, stack = {}, [json.loads(text)]
            while stack:
                node = stack.pop()
                nodes[node["nodeid"]] = node
                stack.extend(node.get("children", []))
            self.trees.append(nodes)
        names = booster.feature_names
        self.index = {n: i for i, n in enumerate(names)} if names else None
        base = float(config["learner_model_param"]["base_score"].strip("[]"))
        logit = config["objective"]["name"] in ("binary:logistic", "reg:logistic", "binary:logitraw")
        self.base = float(np.float32(-math.log(1.0 / base - 1.0) if logit else base))

    def leaves(self, X) -> np.ndarray:
        """``(n_rows, n_trees)``: the float32 leaf value each row reaches in each tree (as float64); the walk of
        the last array given is kept (the methods below ask for it in turn)."""
        kept = getattr(self, "_kept", None)
        if kept is not None and kept[0] is X:
            return kept[1]
        out = self._walk(X)
        self._kept = (X, out)
        return out

    def _walk(self, X) -> np.ndarray:
        import math

        X = np.asarray(X, dtype=np.float32)
        out = np.empty((X.shape[0], len(self.trees)))
        for i, row in enumerate(X.astype(np.float64).tolist()):  # float32 values, exactly, as Python floats
            for t, nodes in enumerate(self.trees):
                node = nodes[0]
                while "leaf" not in node:
                    f = self.index[node["split"]] if self.index else int(node["split"][1:])
                    x, cond = row[f], node["split_condition"]
                    if math.isnan(x):
                        node = nodes[node["missing"]]
                    elif isinstance(cond, list):
                        node = nodes[node["yes"] if int(x) in cond else node["no"]]
                    else:
                        node = nodes[node["yes"] if x < float(np.float32(cond)) else node["no"]]
                out[i, t] = float(np.float32(node["leaf"]))
        return out

    def margins(self, X) -> np.ndarray:
        """``(n_rows, n_trees + 1)``: column k is the double sum of the base margin and the first k trees'
        leaves, added one at a time in tree order (``numpy.cumsum`` adds sequentially)."""
        leaves = self.leaves(X)
        return np.cumsum(np.column_stack([np.full(len(leaves), self.base), leaves]), axis=1)

    def margin(self, X) -> np.ndarray:
        return self.margins(X)[:, -1]

    def float32_margin(self, X) -> np.ndarray:
        """The same leaves summed as XGBoost's own predictor does: a float32 accumulator from the base margin."""
        leaves = self.leaves(X).astype(np.float32)
        acc = np.full(len(leaves), self.base, dtype=np.float32)
        for k in range(leaves.shape[1]):
            acc = acc + leaves[:, k]
        return acc.astype(np.float64)

    def float32_rounding(self, X) -> np.ndarray:
        """Per row, a bound on the rounding of that float32 sum: half an ulp of each partial sum."""
        leaves = self.leaves(X).astype(np.float32)
        acc = np.full(len(leaves), self.base, dtype=np.float32)
        bound = np.zeros(len(leaves))
        for k in range(leaves.shape[1]):
            acc = acc + leaves[:, k]
            bound += np.spacing(np.abs(acc)).astype(np.float64) / 2
        return bound


@pytest.fixture(scope="session")
def xgb_by_hand():
    """``xgb_by_hand(booster, n_rounds=None)``: :class:`XGBoostByHand` of the booster's first rounds."""
    return XGBoostByHand
