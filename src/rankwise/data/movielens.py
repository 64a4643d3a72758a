"""MovieLens 100k as a learning-to-rank problem: one query per user, the rating as the label.

Features of a (user, item) row, as a recommender would build them, all computed from the
**training part only** (so the test part leaks nothing into its own features):

- ``genre_<name>`` (19): the item's genre flags from ``u.item``;
- ``release_year``: from the item's release date; where it is missing (item 267), the mean
  release year of the items rated in the training part;
- ``item_mean_rating``, ``item_rating_count``: mean and number of the item's ratings in the
  training part (items unseen in training get the global training mean and count 0);
- ``user_mean_rating``: mean of the user's ratings in the training part (global mean if none).

Training rows' own ratings are part of those training statistics (the usual practice), so
metrics on the training part are optimistic; the test part is clean.

Reference: F. Maxwell Harper and Joseph A. Konstan, "The MovieLens Datasets: History and
Context", ACM Transactions on Interactive Intelligent Systems 5(4), 2015.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from rankwise.data.dataset import RankingDataset
from rankwise.errors import DataNotFoundError, InputError, ParseError

__all__ = ["load_movielens_100k", "SPLITS"]

SPLITS = ("u1", "u2", "u3", "u4", "u5", "ua", "ub")


def _read_ratings(path: Path) -> np.ndarray:
    if not path.exists():
        raise DataNotFoundError(f"{path}: missing; expected the MovieLens 100k files (u.data, u.item, "
                                "u1.base, ...) in this folder")
    rows = []
    for k, line in enumerate(path.read_text(encoding="latin-1").splitlines(), start=1):
        if not line.strip():
            continue
        f = line.split("\t")
        if len(f) != 4:
            raise ParseError(path, k, f"{len(f)} tab-separated fields; expected 'user item rating timestamp'")
        try:
            rows.append([int(v) for v in f])
        except ValueError:
            raise ParseError(path, k, f"non-integer field in {line!r}; expected 'user item rating timestamp'") from None
    if not rows:
        raise ParseError(path, None, "no ratings")
    return np.asarray(rows, dtype=np.int64)


def _read_items(path: Path, genre_path: Path):
    if not path.exists():
        raise DataNotFoundError(f"{path}: missing; expected u.item of MovieLens 100k")
    genres = [ln.split("|")[0] for ln in genre_path.read_text(encoding="latin-1").splitlines() if ln.strip()]
    ids, years, flags = [], [], []
    for k, line in enumerate(path.read_text(encoding="latin-1").splitlines(), start=1):
        if not line.strip():
            continue
        f = line.split("|")
        if len(f) != 5 + len(genres):
            raise ParseError(path, k, f"{len(f)} '|'-separated fields; expected {5 + len(genres)} "
                                      f"(id|title|release date|video date|url|{len(genres)} genre flags)")
        ids.append(int(f[0]))
        date = f[2].strip()
        years.append(float(date[-4:]) if len(date) >= 4 and date[-4:].isdigit() else np.nan)
        flags.append([int(v) for v in f[5:]])
    return np.asarray(ids), np.asarray(years), np.asarray(flags, dtype=np.float32), genres


def load_movielens_100k(path=None, split: str = "u1") -> tuple[RankingDataset, RankingDataset]:
    """MovieLens 100k as (train, test) ranking data sets, one query per user.

    Parameters
    ----------
    path : str or Path, optional
        The ``ml-100k`` folder. Default: ``fetch("movielens-100k")`` (``$RANKWISE_DATA``, the cache,
        or a download).
    split : {"u1", ..., "u5", "ua", "ub"}
        The distribution's official split: ``<split>.base`` is the training part, ``<split>.test``
        the test part (u1..u5: 80k/20k ratings, disjoint test sets; ua/ub: 10 ratings per user in test).

    Returns
    -------
    train, test : RankingDataset
        Query id = user id, doc id = item id, label = rating 1..5; rows of a user sorted by item id.
        23 features (see the module docstring), named in ``feature_names``.
    """
    if split not in SPLITS:
        raise InputError(f"split must be one of {SPLITS}; got {split!r}")
    if path is None:
        from rankwise.data.fetchers import fetch

        path = fetch("movielens-100k")
    path = Path(path)
    train = _read_ratings(path / f"{split}.base")
    test = _read_ratings(path / f"{split}.test")
    item_ids, years, flags, genres = _read_items(path / "u.item", path / "u.genre")
    n_items = int(max(item_ids.max(), train[:, 1].max(), test[:, 1].max())) + 1
    n_users = int(max(train[:, 0].max(), test[:, 0].max())) + 1
    G = np.zeros((n_items, len(genres)), dtype=np.float32)
    G[item_ids] = flags
    Y = np.full(n_items, np.nan)
    Y[item_ids] = years
    Y[np.isnan(Y)] = np.nanmean(Y[np.unique(train[:, 1])])  # mean year of the items rated in training

    r = train[:, 2].astype(np.float64)
    gmean = r.mean()
    icount = np.bincount(train[:, 1], minlength=n_items).astype(np.float64)
    isum = np.bincount(train[:, 1], weights=r, minlength=n_items)
    imean = np.where(icount > 0, isum / np.maximum(icount, 1), gmean)
    ucount = np.bincount(train[:, 0], minlength=n_users).astype(np.float64)
    usum = np.bincount(train[:, 0], weights=r, minlength=n_users)
    umean = np.where(ucount > 0, usum / np.maximum(ucount, 1), gmean)

    names = [f"genre_{g}" for g in genres] + ["release_year", "item_mean_rating", "item_rating_count",
                                              "user_mean_rating"]

    def build(part):
        part = part[np.lexsort((part[:, 1], part[:, 0]))]
        u, i = part[:, 0], part[:, 1]
        X = np.column_stack([G[i], Y[i], imean[i], icount[i], umean[u]]).astype(np.float32)
        return RankingDataset.from_arrays(X, part[:, 2].astype(np.float64), u, doc_ids=i.astype(str),
                                          feature_names=names, allow_nan=False)

    return build(train), build(test)
