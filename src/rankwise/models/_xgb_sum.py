"""XGBoost scores summed in double: the trees' float32 leaves and the base margin added in float64.

XGBoost's own ``predict(output_margin=True)`` adds the float32 leaf values of a row's trees to a
float32 accumulator that starts at the base margin; over hundreds of trees its rounding reaches
~1e-6 of the score. :class:`~rankwise.models.GBDTRanker` scores in double instead, as LightGBM
does: XGBoost still decides every split (``predict(pred_leaf=True)`` gives the leaf each row reaches
in each tree), and the leaves' float32 values, read exactly from the booster's own JSON
(``save_raw("json")``), are added to the float64 base margin one tree after another, in the
booster's tree order. The result differs from XGBoost's float32 sum only by that sum's rounding.
"""
from __future__ import annotations

import json
import math
import weakref
from dataclasses import dataclass

import numpy as np

from rankwise.errors import InputError

# XGBoost objectives whose margin is the base score mapped by the logit (ProbToMargin), and those
# whose margin is the base score itself
XGB_LOGIT_BASE = frozenset({"binary:logistic", "reg:logistic", "binary:logitraw"})
XGB_IDENTITY_BASE = frozenset({"reg:squarederror", "reg:linear", "reg:pseudohubererror", "reg:absoluteerror",
                               "reg:quantileerror", "rank:ndcg", "rank:map", "rank:pairwise", "binary:hinge"})

#: leaf indices fetched per block of rows: at most this many (row, tree) entries at once
_BLOCK_ENTRIES = 1 << 22


def xgb_base_margin(base_score: str, objective: str, refuse=None) -> float:
    """The float32 base margin XGBoost adds before the trees, from the model's ``base_score`` string
    (``"5E-1"`` or ``"[5E-1]"``) and its objective name. ``refuse(what)`` raises for a multi-output model."""
    vals = json.loads(base_score) if base_score.startswith("[") else [float(base_score)]
    if len(vals) != 1:
        (refuse or _refuse)(f"XGBoost model with {len(vals)} base scores (multi-output)")
    bs = float(vals[0])  # XGBoost maps the base score to a margin in double, then keeps a float32
    if objective in XGB_IDENTITY_BASE:
        return float(np.float32(bs))
    if objective in XGB_LOGIT_BASE:
        return float(np.float32(-math.log(1.0 / bs - 1.0)))
    raise InputError(f"XGBoost objective {objective!r}: rankwise knows the base margin of "
                     f"{sorted(XGB_IDENTITY_BASE | XGB_LOGIT_BASE)} only")


def _refuse(what: str) -> None:
    raise InputError(f"{what}: rankwise scores single-output XGBoost tree ensembles only")


@dataclass(frozen=True)
class LeafTable:
    """Every node value of the first ``n_rounds`` rounds' trees, flat: tree ``k``'s node ``j`` at
    ``values[offsets[k] + j]`` (the float32 leaf value, times the tree's DART weight, as float64)."""

    values: np.ndarray   # float64
    offsets: np.ndarray  # int64, one per tree
    base: float          # the base margin (float32 value)
    n_rounds: int


def _trees_of(raw: dict):
    """The tree list and per-tree weights (None unless DART) of a parsed ``save_raw("json")``."""
    gb = raw["learner"]["gradient_booster"]
    name = gb.get("name")
    if name == "gbtree":
        return gb["model"], None
    if name == "dart":
        return gb["gbtree"]["model"], [float(np.float32(w)) for w in gb["weight_drop"]]
    return None, None


def leaf_table(booster, n_rounds: int) -> LeafTable | None:
    """The :class:`LeafTable` of ``booster``'s rounds ``0..n_rounds-1`` (None for a booster without trees,
    ``gblinear``, or with an objective outside :data:`XGB_IDENTITY_BASE` and :data:`XGB_LOGIT_BASE`)."""
    raw = json.loads(bytes(booster.save_raw("json")))
    learner = raw["learner"]
    model, weights = _trees_of(raw)
    if model is None or learner["objective"]["name"] not in XGB_IDENTITY_BASE | XGB_LOGIT_BASE:
        return None  # no trees, or an objective whose base margin rankwise does not know: XGBoost's own sum
    base = xgb_base_margin(learner["learner_model_param"]["base_score"], learner["objective"]["name"])
    per_round = int(model["gbtree_model_param"].get("num_parallel_tree", "1"))
    if int(learner["learner_model_param"].get("num_class", "0")) > 1 or any(int(i) for i in model["tree_info"]):
        _refuse("XGBoost model with several output groups")
    trees = model["trees"][: n_rounds * per_round]
    values, offsets, at = [], [], 0
    for k, tree in enumerate(trees):
        if int(tree["tree_param"].get("size_leaf_vector", "1")) > 1:
            _refuse("XGBoost vector-leaf tree")
        # a leaf's value is held in split_conditions, as a float32 printed to read back exactly
        v = np.asarray(tree["split_conditions"], dtype=np.float64).astype(np.float32).astype(np.float64)
        if weights is not None:  # DART scales each tree's output by its weight, in float32
            v = (v.astype(np.float32) * np.float32(weights[k])).astype(np.float64)
        values.append(v)
        offsets.append(at)
        at += len(v)
    return LeafTable(np.concatenate(values) if values else np.empty(0), np.asarray(offsets, dtype=np.int64),
                     base, int(n_rounds))


_TABLES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def cached_leaf_table(booster, n_rounds: int) -> LeafTable | None:
    """:func:`leaf_table`, kept per booster object (and its number of rounds) while the booster lives."""
    key = (int(n_rounds), int(booster.num_boosted_rounds()))
    kept = _TABLES.get(booster)
    if kept is not None and kept[0] == key:
        return kept[1]
    table = leaf_table(booster, n_rounds)
    _TABLES[booster] = (key, table)  # one assignment: threads predicting at once see one table or the other
    return table


def sum_leaves(table: LeafTable, leaves: np.ndarray, start: np.ndarray | None = None) -> np.ndarray:
    """The double scores of rows whose leaf indices (``(n_rows, n_trees)``, as ``pred_leaf`` gives them)
    are ``leaves``: ``start`` (default: the base margin), then each tree's leaf value added in tree order."""
    leaves = np.asarray(leaves).reshape(leaves.shape[0], -1)
    if leaves.shape[1] != len(table.offsets):
        raise InputError(f"XGBoost returned {leaves.shape[1]} leaf indices per row for {len(table.offsets)} trees")
    idx = leaves.T.astype(np.int64)  # one contiguous row per tree
    idx += table.offsets[:, None]
    vals = table.values[idx]
    acc = np.full(leaves.shape[0], table.base, dtype=np.float64) if start is None else np.array(start, np.float64)
    for row in vals:
        acc += row
    return acc


def _leaves(booster, dm, n_rounds: int) -> np.ndarray:
    return booster.predict(dm, pred_leaf=True, iteration_range=(0, n_rounds), validate_features=False)


def predict_double(booster, X, n_rounds: int, make_dmatrix) -> np.ndarray | None:
    """``booster``'s margin of each row of ``X`` (rounds ``0..n_rounds-1``) summed in double
    (:func:`sum_leaves`); ``make_dmatrix(rows)`` builds the DMatrix of a block of rows. None where
    :func:`leaf_table` is None: XGBoost's own prediction is then the score."""
    table = cached_leaf_table(booster, n_rounds)
    if table is None:
        return None
    n = X.shape[0]
    if n == 0 or len(table.offsets) == 0:
        return np.full(n, table.base, dtype=np.float64)
    step = max(1, _BLOCK_ENTRIES // len(table.offsets))
    out = np.empty(n, dtype=np.float64)
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        out[lo:hi] = sum_leaves(table, _leaves(booster, make_dmatrix(X[lo:hi]), n_rounds))
    return out


class RunningScores:
    """The double scores (:func:`predict_double`) of one DMatrix's rows kept from round to round while a
    booster grows: each round adds the new trees' leaves to the kept sums, so a round costs its own trees
    only, and the result is, bit for bit, the double sum over every tree. DART, whose rounds re-weight
    earlier trees, is summed again from the base margin every round (as XGBoost itself does)."""

    def __init__(self, dm):
        self.dm, self.acc, self.rounds, self.dart = dm, None, 0, None

    def update(self, booster) -> np.ndarray | None:
        r = int(booster.num_boosted_rounds())
        if self.dart is None:
            self.dart = json.loads(booster.save_config())["learner"]["gradient_booster"].get("name") != "gbtree"
        if self.acc is None or self.dart:
            table = leaf_table(booster, r)
            if table is None:
                return None
            self.acc = sum_leaves(table, _leaves(booster, self.dm, r)) if len(table.offsets) else \
                np.full(self.dm.num_row(), table.base)
        elif r > self.rounds:
            new = booster[self.rounds:r]
            self.acc = sum_leaves(leaf_table(new, r - self.rounds), _leaves(new, self.dm, r - self.rounds),
                                  start=self.acc)
        self.rounds = r
        return self.acc.copy()
