"""Event logs ``(user, item, outcome)`` turned into binary-labelled ranking lists (one query per user)."""
from __future__ import annotations

import numpy as np

from rankwise.data.clicklog import ClickLog, _codes
from rankwise.data.dataset import RankingDataset
from rankwise.errors import InputError

__all__ = ["from_events"]

_RULES = ("any", "last", "majority")


def from_events(frame, *, user: str, item: str, outcome: str, features=None, rule: str = "any",
                time: str | None = None) -> RankingDataset:
    """Turn an event log into a ranking data set: one query per user, one row per (user, item).

    Repeated events of the same (user, item) pair are aggregated into one binary label:

    - ``rule="any"`` (default): 1 if any of the pair's events is a success, else 0;
    - ``rule="last"``: the outcome of the pair's last event (by ``time`` if given, else file order);
    - ``rule="majority"``: 1 if strictly more than half of the pair's events are successes.

    Feature columns are averaged over the pair's events. An event log is a click log of one-document
    sessions: the labels are :meth:`rankwise.data.ClickLog.pair_labels`, the one aggregation rule of clicks.

    Parameters
    ----------
    frame : pandas.DataFrame
    user, item, outcome : str
        Column names. ``outcome`` holds booleans, 0/1, or the strings ``"success"``/``"fail"``.
    features : list of str, optional
        Numeric columns to use as features (mean per pair); default none (``X`` has 0 columns).
    rule : {"any", "last", "majority"}
    time : str, optional
        Column ordering events for ``rule="last"``.

    Returns
    -------
    RankingDataset
        Query ids = users (order of first appearance), doc ids = items (order of first
        appearance within the user), labels in {0, 1}, one row per distinct (user, item).
    """
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise InputError(f"frame must be a pandas DataFrame; got {type(frame).__name__}")
    if rule not in _RULES:
        raise InputError(f"rule must be one of {_RULES}; got {rule!r}")
    features = [] if features is None else list(features)
    needed = [user, item, outcome] + features + ([time] if time else [])
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise InputError(f"columns {missing} are not in the frame; it has {list(frame.columns)[:10]}")
    if len(frame) == 0:
        raise InputError("frame has no events")
    for c in (user, item):
        if frame[c].isna().any():
            raise InputError(f"column {c!r} has missing values; every event needs a {c}")
    o = frame[outcome]
    if o.dtype == object or pd.api.types.is_string_dtype(o):
        low = o.astype(str).str.lower()
        ok = low.isin(["success", "fail", "true", "false", "1", "0"])
        if not ok.all():
            bad = o[~ok].iloc[0]
            raise InputError(f"outcome column {outcome!r} has value {bad!r}; expected success/fail, True/False or 1/0")
        y = low.isin(["success", "true", "1"]).to_numpy()
    else:
        vals = o.to_numpy()
        if o.isna().any() or not np.isin(vals.astype(np.float64), [0.0, 1.0]).all():
            raise InputError(f"outcome column {outcome!r} must hold only 0/1 or booleans (no missing values)")
        y = vals.astype(bool)
    for f in features:
        if not pd.api.types.is_numeric_dtype(frame[f]):
            raise InputError(f"feature column {f!r} is not numeric")
        with np.errstate(all="ignore"):
            col = frame[f].to_numpy(dtype=np.float64)
            bad = ~np.isfinite(col) | (np.abs(col) > np.finfo(np.float32).max)
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            raise InputError(f"feature column {f!r} has {float(col[r])!r} at row {r}; features must be "
                             "finite numbers within the float32 range: impute or drop missing values first")
    # an event log is a click log of one-document sessions (user = query, item = doc, outcome = click),
    # and its labels are the click log's aggregation rule
    n = len(frame)
    uc, uv = _codes(frame[user].to_numpy())
    ic, iv = _codes(frame[item].to_numpy())
    log = ClickLog(np.arange(n + 1, dtype=np.int64), uc, uv, ic, iv, y.astype(np.uint8))
    order = frame[time].to_numpy() if rule == "last" and time is not None else None
    labels = log.pair_labels(rule, order=order)
    # users in order of first appearance, items in order of first appearance within the user (pair codes
    # are numbered in order of first appearance, so a stable sort by user keeps that order within a user)
    keep = np.argsort(log.pair_query, kind="stable")
    imp = np.bincount(log.pair, minlength=log.n_pairs)
    X = np.empty((log.n_pairs, len(features)), dtype=np.float64)
    for k, f in enumerate(features):
        X[:, k] = np.bincount(log.pair, weights=frame[f].to_numpy(dtype=np.float64), minlength=log.n_pairs) / imp
    qids, docs = log.pair_keys()
    return RankingDataset.from_arrays(X[keep].astype(np.float32), labels[keep], qids[keep],
                                      doc_ids=pd.Series(docs[keep]).astype(str).to_numpy(),
                                      feature_names=[str(f) for f in features])
