"""Recommendation as ranking: ratings → per-user time-based split → candidate lists → leak-free features.

The glue between a ratings file (MovieLens or any ``(user, item, rating, timestamp)`` table) and a
ranker, in four steps:

1. :class:`Ratings` / :class:`Items`: validated arrays (ids, ratings, timestamps; item genre flags);
2. :func:`temporal_split`: for every user, the ratings from the user's **cutoff** time on are the
   test part, the earlier ones the training part;
3. :func:`sample_candidates`: one list per user: the items rated in that part (positives, label =
   the rating or 1) and ``n_negatives`` items sampled uniformly, with a seed, among the items the
   user has not rated (label 0);
4. :func:`candidate_features`: user and item features computed **only from the training part and
   only from ratings made before the user's cutoff**, so nothing of any test period reaches a
   feature.

:func:`recommendation_data` runs the four steps and returns ``(train, test)`` RankingDatasets
(query id = user id, doc id = item id).

Notes
-----
*Leakage.* Every user's test ratings are later than all of that user's training ratings (ratings
sharing the cutoff second all go to the test part). Item statistics for user ``u`` use training
ratings of **other** users made **strictly before** ``u``'s cutoff ``t_u``; a per-user cutoff alone
would let another user's later training ratings describe an item as it will be, which is why the
statistics are taken *as of* ``t_u`` rather than over the whole training part. The user's own
rating of a training positive is left out of that item's statistics (else a positive would
always have a count ≥ 1 and its own rating in its mean, a pattern absent at test time). User
statistics (count, mean, recency) are the same for every row of a list, so they cannot separate
a user's positives from negatives.

*Negatives.* Sampled uniformly among the items that appear in the ratings (or ``catalog``),
excluding every item the user rated in the part's allowed history: for a test list, any item the
user rated at all; for a training list, the items rated in the training part (a test item may be
a training negative: excluding it would use the test part to build training data).

References
----------
F. Maxwell Harper and Joseph A. Konstan, "The MovieLens Datasets: History and Context", ACM TiiS
5(4), 2015. W. Krichene and S. Rendle, "On Sampled Metrics for Item Recommendation", KDD 2020
(sampled-negative metrics rank models differently from full-catalogue ones: compare models on
the same candidates only).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rankwise.errors import InputError, ParseError

__all__ = ["Ratings", "Items", "TimeSplit", "Candidates", "temporal_split", "sample_candidates",
           "candidate_features", "recommendation_data", "serving_data", "FEATURES"]

_DAY = 86400.0

#: feature columns of :func:`candidate_features` before the ``genre_<name>`` flags (``item_year``
#: only where the items carry a year)
FEATURES = ("item_count", "item_mean_rating", "item_days_since_last", "item_days_since_first", "item_year",
            "user_count", "user_mean_rating", "user_days_since_last", "user_genre_share")


def _int_ids(values, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise InputError(f"{name} must be 1-d; got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)) \
                and (len(arr) == 0 or np.abs(arr).max() < 2**53):
            arr = arr.astype(np.int64)
        else:
            raise InputError(f"{name} must be integer ids; got dtype {arr.dtype}")
    if arr.dtype.kind == "u" and len(arr) and arr.max() > np.iinfo(np.int64).max:
        raise InputError(f"{name} has ids beyond int64")
    return arr.astype(np.int64, copy=False)


@dataclass(frozen=True)
class Ratings:
    """One rating per (user, item): ids (int64 ≥ 1), rating (finite float), timestamp (int64 ≥ 0).

    ``line`` (optional) holds the line number of each rating in ``source``, so that errors found
    later (a duplicate pair, an unknown item) name ``path:line``. Construction checks lengths, ids,
    finite ratings, non-negative timestamps and that no (user, item) pair is rated twice.
    """

    user: np.ndarray
    item: np.ndarray
    rating: np.ndarray
    timestamp: np.ndarray
    line: np.ndarray | None = None
    source: str | None = None

    def __post_init__(self):
        user = _int_ids(self.user, "user")
        n = len(user)
        item = _int_ids(self.item, "item")
        ts = _int_ids(self.timestamp, "timestamp")
        try:
            rating = np.asarray(self.rating, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError("rating must be numeric") from None
        for name, arr in (("item", item), ("rating", rating), ("timestamp", ts)):
            if arr.shape != (n,):
                raise InputError(f"{name} has shape {arr.shape}; expected ({n},), one entry per rating")
        object.__setattr__(self, "user", user)
        object.__setattr__(self, "item", item)
        object.__setattr__(self, "rating", rating)
        object.__setattr__(self, "timestamp", ts)
        if self.line is not None:
            object.__setattr__(self, "line", np.asarray(self.line, dtype=np.int64))
        for name, arr in (("user", user), ("item", item)):
            if n and arr.min() < 1:
                self._fail(int(np.argmin(arr)), f"{name} id {int(arr.min())} is not valid; ids start at 1")
        if n and not np.all(np.isfinite(rating)):
            self._fail(int(np.flatnonzero(~np.isfinite(rating))[0]), "rating is NaN or inf")
        if n and ts.min() < 0:
            self._fail(int(np.argmin(ts)), f"timestamp {int(ts.min())} is negative")
        order = np.lexsort((item, user))
        dup = np.flatnonzero((user[order][1:] == user[order][:-1]) & (item[order][1:] == item[order][:-1]))
        if len(dup):
            a, b = sorted((int(order[dup[0]]), int(order[dup[0] + 1])))
            first = f" (first at line {int(self.line[a])})" if self.line is not None else f" (first at row {a})"
            self._fail(b, f"user {int(user[b])} rates item {int(item[b])} again{first}; expected one rating "
                          f"per (user, item) pair ({len(dup)} repeated pairs in all)")

    def _fail(self, row: int, message: str):
        if self.line is not None:
            raise ParseError(self.source or "ratings", int(self.line[row]), message)
        raise InputError(f"row {row}: {message}")

    def __len__(self) -> int:
        return len(self.user)

    def subset(self, mask) -> "Ratings":
        """The ratings where ``mask`` (boolean or index array) selects."""
        line = None if self.line is None else self.line[mask]
        return Ratings(self.user[mask], self.item[mask], self.rating[mask], self.timestamp[mask], line, self.source)


@dataclass(frozen=True)
class Items:
    """Item metadata: ids (unique), ``genre_flags`` (n_items × n_genres, 0/1), genre names, year."""

    ids: np.ndarray
    genre_flags: np.ndarray
    genres: list
    titles: list | None = None
    year: np.ndarray | None = None
    line: np.ndarray | None = None
    source: str | None = None
    _sorted: tuple = field(default=(), repr=False, compare=False)

    def __post_init__(self):
        ids = _int_ids(self.ids, "Items ids")
        G = np.asarray(self.genre_flags, dtype=np.float32)
        if G.ndim != 2 or G.shape != (len(ids), len(self.genres)):
            raise InputError(f"genre_flags must have shape (n_items, n_genres) = ({len(ids)}, {len(self.genres)}); "
                             f"got {G.shape}")
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "genre_flags", G)
        order = np.argsort(ids, kind="stable")
        dup = np.flatnonzero(ids[order][1:] == ids[order][:-1])
        if len(dup):
            a, b = sorted((int(order[dup[0]]), int(order[dup[0] + 1])))
            if self.line is not None:
                raise ParseError(self.source or "items", int(self.line[b]), f"item id {int(ids[b])} is listed again "
                                 f"(first at line {int(self.line[a])}); expected each once")
            raise InputError(f"Items ids are not unique: item id {int(ids[b])} at rows {a} and {b}")
        object.__setattr__(self, "_sorted", (ids[order], order))

    def row_of(self, ids) -> np.ndarray:
        """Row of each id in these items; InputError naming the first id that is not listed."""
        ids = np.asarray(ids, dtype=np.int64)
        s, order = self._sorted
        pos = np.clip(np.searchsorted(s, ids), 0, max(len(s) - 1, 0))
        ok = s[pos] == ids if len(s) else np.zeros(len(ids), bool)
        if not np.all(ok):
            bad = ids[~ok]
            raise InputError(f"item id {int(bad[0])} is not in the items ({len(bad)} ids absent)")
        return order[pos]


@dataclass(frozen=True)
class TimeSplit:
    """A per-user time-based split: ``train`` and ``test`` ratings, and each test user's cutoff.

    ``users`` (sorted) and ``cutoff``: user ``users[j]``'s test part is their ratings with
    ``timestamp >= cutoff[j]``; every training rating of that user is earlier. Users kept whole
    in the training part (too few ratings before their cutoff) have no cutoff entry; their
    features use a cutoff just after their last rating.
    """

    train: Ratings
    test: Ratings
    users: np.ndarray
    cutoff: np.ndarray

    def cutoff_of(self, users) -> np.ndarray:
        """The cutoff time of each user (training-only users: one second after their last rating)."""
        users = np.asarray(users, dtype=np.int64)
        pos = np.clip(np.searchsorted(self.users, users), 0, max(len(self.users) - 1, 0))
        has = (self.users[pos] == users) if len(self.users) else np.zeros(len(users), bool)
        out = np.empty(len(users), dtype=np.int64)
        out[has] = self.cutoff[pos[has]]
        if not np.all(has):
            tr_users, inv = np.unique(self.train.user, return_inverse=True)
            last = np.full(len(tr_users), np.iinfo(np.int64).min)
            np.maximum.at(last, inv, self.train.timestamp)
            p = np.searchsorted(tr_users, users[~has])
            if np.any(p >= len(tr_users)) or np.any(tr_users[np.minimum(p, len(tr_users) - 1)] != users[~has]):
                raise InputError("a user is in neither part of the split")
            out[~has] = last[p] + 1
        return out


def temporal_split(ratings: Ratings, *, test_fraction: float = 0.2, min_train: int = 1) -> TimeSplit:
    """Per-user time-based split: each user's latest ratings form the test part.

    .. math::

        t_u = \\text{the } \\lceil f\\, n_u \\rceil\\text{-th latest rating time of } u, \\qquad
        \\text{test}_u = \\{r : t_r \\ge t_u\\}, \\quad \\text{train}_u = \\{r : t_r < t_u\\}

    Ratings made in the cutoff second all go to the test part, so no test rating of a user is
    earlier than (or simultaneous with) one of their training ratings. A user whose training part
    would hold fewer than ``min_train`` ratings (e.g. every rating in one second) stays whole in
    the training part and has no test list.

    Parameters
    ----------
    ratings : Ratings
    test_fraction : float in (0, 1)
        ``f``: the share of each user's ratings, counted from the latest, that the cutoff keeps out.
    min_train : int ≥ 1
    """
    if not isinstance(ratings, Ratings):
        raise InputError(f"ratings must be a rankwise.data.recsys.Ratings; got {type(ratings).__name__}")
    if isinstance(test_fraction, bool) or not isinstance(test_fraction, (int, float)) or not 0 < test_fraction < 1:
        raise InputError(f"test_fraction must be a number in (0, 1); got {test_fraction!r}")
    if isinstance(min_train, bool) or not isinstance(min_train, (int, np.integer)) or min_train < 1:
        raise InputError(f"min_train must be an integer >= 1; got {min_train!r}")
    if len(ratings) == 0:
        raise InputError("ratings is empty")
    users, inv, counts = np.unique(ratings.user, return_inverse=True, return_counts=True)
    order = np.lexsort((-ratings.timestamp, inv))  # by user, latest first
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    k = np.ceil(test_fraction * counts).astype(np.int64)  # ≥ 1
    cut = ratings.timestamp[order[starts + k - 1]]
    is_test = ratings.timestamp >= cut[inv]
    n_train = np.bincount(inv, weights=~is_test, minlength=len(users))
    whole = n_train < min_train
    is_test &= ~whole[inv]
    keep = ~whole
    return TimeSplit(ratings.subset(~is_test), ratings.subset(is_test), users[keep], cut[keep])


@dataclass(frozen=True)
class Candidates:
    """Candidate rows ``(user, item)`` with ``label``; ``positive`` marks rated items; grouped by user."""

    user: np.ndarray
    item: np.ndarray
    label: np.ndarray
    positive: np.ndarray
    part: str


def _check_n_negatives(value, name: str) -> None:
    if isinstance(value, str) and value == "all":
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise InputError(f"{name} must be an integer >= 0 or 'all' (the full catalogue); got {value!r}")


def _rated_by(hist: Ratings, users: np.ndarray):
    """``seen(j)``: the items ``users[j]`` rated in ``hist`` (``users`` sorted)."""
    h_order = np.lexsort((hist.item, hist.user))
    h_user, h_item = hist.user[h_order], hist.item[h_order]
    lo = np.searchsorted(h_user, users, side="left")
    hi = np.searchsorted(h_user, users, side="right")
    return lambda j: h_item[lo[j]:hi[j]]


def sample_candidates(split: TimeSplit, *, part: str = "test", n_negatives: int = 100, relevance: str = "rating",
                      catalog=None, random_state=0) -> Candidates:
    """One candidate list per user: the items rated in ``part`` plus ``n_negatives`` sampled unrated items.

    Parameters
    ----------
    split : TimeSplit
    part : {"train", "test"}
    n_negatives : int ≥ 0 or "all"
        Negatives per user, drawn uniformly without replacement (all of them when fewer exist).
        ``"all"``: every catalogue item the user has not rated in the allowed history, in id order
        — for ``part="test"``, the **full catalogue** less the user's training items, the
        evaluation Krichene and Rendle (KDD 2020) ask for instead of sampled negatives.
    relevance : {"rating", "binary"}
        Label of a rated item: its rating, or 1. Sampled negatives get 0.
    catalog : array of item ids, optional
        The items negatives are drawn from (default: every item in the split's ratings).
    random_state : int, numpy Generator or None
        Seeds the sampling; users are visited in increasing id order, so an int gives the same lists.

    Returns
    -------
    Candidates
        Rows of a user contiguous (users in increasing id), positives first (by item id), then
        negatives (by item id).
    """
    if part not in ("train", "test"):
        raise InputError(f"part must be 'train' or 'test'; got {part!r}")
    if relevance not in ("rating", "binary"):
        raise InputError(f"relevance must be 'rating' or 'binary'; got {relevance!r}")
    _check_n_negatives(n_negatives, "n_negatives")
    rng = np.random.default_rng(random_state)
    pos = split.test if part == "test" else split.train
    if catalog is None:
        catalog = np.unique(np.concatenate([split.train.item, split.test.item]))
    else:
        catalog = np.unique(_int_ids(catalog, "catalog"))
    # history the negatives must avoid: test lists avoid everything the user rated, training lists
    # only what the user rated in the training part
    hist = split.train if part == "train" else Ratings(
        np.concatenate([split.train.user, split.test.user]), np.concatenate([split.train.item, split.test.item]),
        np.concatenate([split.train.rating, split.test.rating]),
        np.concatenate([split.train.timestamp, split.test.timestamp]))
    p_order = np.lexsort((pos.item, pos.user))
    p_user, p_item, p_rating = pos.user[p_order], pos.item[p_order], pos.rating[p_order]
    users, p_start = np.unique(p_user, return_index=True)
    p_end = np.append(p_start[1:], len(p_user))
    seen_of = _rated_by(hist, users)
    out_u, out_i, out_l, out_p = [], [], [], []
    n_cat = len(catalog)
    for j, u in enumerate(users):
        items_u = p_item[p_start[j]:p_end[j]]
        labels_u = p_rating[p_start[j]:p_end[j]] if relevance == "rating" else np.ones(len(items_u))
        seen = seen_of(j)
        if isinstance(n_negatives, str):  # "all": the whole catalogue less the user's history
            neg = catalog[~np.isin(catalog, seen)]
        else:
            n_free = n_cat - int(np.count_nonzero(np.isin(seen, catalog, assume_unique=True)))  # O(|seen| log)
            m = min(int(n_negatives), n_free)
            neg = np.zeros(0, dtype=np.int64)
            if m > 0:
                # a uniform random prefix of the catalogue with the user's items dropped is a
                # uniform sample of the free items; drawing m + |seen| always leaves m of them
                draw = catalog[rng.choice(n_cat, size=min(n_cat, m + len(seen)), replace=False)]
                neg = np.sort(draw[~np.isin(draw, seen)][:m])
        out_u.append(np.full(len(items_u) + len(neg), u, dtype=np.int64))
        out_i.append(np.concatenate([items_u, neg]))
        out_l.append(np.concatenate([labels_u, np.zeros(len(neg))]))
        out_p.append(np.concatenate([np.ones(len(items_u), bool), np.zeros(len(neg), bool)]))
    if not out_u:
        raise InputError(f"the {part} part of the split has no ratings, so there is no candidate list")
    return Candidates(np.concatenate(out_u), np.concatenate(out_i).astype(np.int64), np.concatenate(out_l),
                      np.concatenate(out_p), part)


def candidate_features(split: TimeSplit, cands: Candidates, items: Items | None = None) -> tuple[np.ndarray, list]:
    """Features of each candidate row, from training ratings before the user's cutoff only.

    For row ``(u, i)`` with cutoff ``t_u`` (:meth:`TimeSplit.cutoff_of`), with :math:`R_i` the
    training ratings of item ``i`` by users other than ``u`` made before ``t_u`` and :math:`R_u`
    the training ratings of ``u``:

    - ``item_count`` :math:`= |R_i|`; ``item_mean_rating`` = their mean (no rating: the mean of all
      training ratings before :math:`t_u`);
    - ``item_days_since_last`` / ``item_days_since_first``: days from the latest / earliest rating
      in :math:`R_i` to :math:`t_u` (no rating: days since the first training rating of the data,
      and 0);
    - ``item_year``: from ``items.year`` (missing: the mean year of the items), when items are given;
    - ``user_count`` :math:`= |R_u|`, ``user_mean_rating``, ``user_days_since_last``: the same for
      every row of a list;
    - ``user_genre_share``: mean, over the item's genres, of the share of the user's *other*
      training ratings that fall in the genre (0 for an item without genres);
    - ``genre_<name>``: the item's genre flags.

    Returns
    -------
    X : ndarray, float32, shape (n_rows, n_features)
    names : list of str
    """
    F = split.train
    t_cut = split.cutoff_of(cands.user)
    if len(F) == 0:
        raise InputError("the training part of the split is empty; no feature can be computed")
    # compact item and user indices over everything involved (never index by raw id)
    all_items, inv_items = np.unique(np.concatenate([F.item, cands.item]), return_inverse=True)
    f_i, c_i = inv_items[:len(F)], inv_items[len(F):]
    all_users, inv_users = np.unique(np.concatenate([F.user, cands.user]), return_inverse=True)
    f_u, c_u = inv_users[:len(F)], inv_users[len(F):]
    times, inv_t = np.unique(np.concatenate([F.timestamp, t_cut]), return_inverse=True)
    f_t, c_t = inv_t[:len(F)], inv_t[len(F):]
    T = np.int64(len(times))

    # ---- item statistics as of each cutoff, leaving the user's own rating out
    o = np.lexsort((f_t, f_i))
    key = f_i[o].astype(np.int64) * T + f_t[o]
    r_sorted = F.rating[o]
    csum = np.concatenate([[0.0], np.cumsum(r_sorted)])
    t_sorted = F.timestamp[o]
    start = np.searchsorted(key, c_i.astype(np.int64) * T, side="left")
    stop = np.searchsorted(key, c_i.astype(np.int64) * T + c_t, side="left")  # strictly before t_u
    count = (stop - start).astype(np.float64)
    ssum = csum[stop] - csum[start]
    # the user's own training rating of the item (at most one), at its position in the sorted order
    pos_in_sorted = np.empty(len(F), dtype=np.int64)
    pos_in_sorted[o] = np.arange(len(F))
    n_users = np.int64(len(all_users))
    pkey = f_i.astype(np.int64) * n_users + f_u
    po = np.argsort(pkey, kind="stable")
    ckey = c_i.astype(np.int64) * n_users + c_u
    j = np.clip(np.searchsorted(pkey[po], ckey), 0, len(F) - 1)
    own = pkey[po][j] == ckey
    own_pos = np.where(own, pos_in_sorted[po[j]], -1)
    own = own & (own_pos >= start) & (own_pos < stop)
    count -= own
    ssum -= np.where(own, F.rating[po[j]], 0.0)
    # global mean of the training ratings before each cutoff
    go = np.argsort(F.timestamp, kind="stable")
    g_csum = np.concatenate([[0.0], np.cumsum(F.rating[go])])
    g_n = np.searchsorted(F.timestamp[go], t_cut, side="left")
    gmean_all = float(F.rating.mean())
    gmean = np.where(g_n > 0, g_csum[g_n] / np.maximum(g_n, 1), gmean_all)
    item_mean = np.where(count > 0, ssum / np.maximum(count, 1), gmean)
    last_pos = stop - 1 - (own & (own_pos == stop - 1))
    first_pos = start + (own & (own_pos == start))
    has = count > 0
    t0 = float(F.timestamp.min())
    t_last = np.where(has, t_sorted[np.clip(last_pos, 0, len(F) - 1)], t0)
    t_first = np.where(has, t_sorted[np.clip(first_pos, 0, len(F) - 1)], t_cut)
    days_last = (t_cut - t_last) / _DAY
    days_first = (t_cut - t_first) / _DAY

    # ---- user statistics (training ratings are all before the user's cutoff)
    n_all_users = len(all_users)
    u_count = np.bincount(f_u, minlength=n_all_users).astype(np.float64)
    u_sum = np.bincount(f_u, weights=F.rating, minlength=n_all_users)
    u_last = np.full(n_all_users, -1, dtype=np.int64)
    np.maximum.at(u_last, f_u, F.timestamp)
    c_count = u_count[c_u]
    user_mean = np.where(c_count > 0, u_sum[c_u] / np.maximum(c_count, 1), gmean)
    user_days = np.where(c_count > 0, (t_cut - u_last[c_u]) / _DAY, 0.0)

    columns = [count, item_mean, days_last, days_first]
    names = ["item_count", "item_mean_rating", "item_days_since_last", "item_days_since_first"]
    genre_cols, genre_names = None, []
    if items is not None:
        rows = items.row_of(cands.item)
        if items.year is not None:
            year = np.asarray(items.year, dtype=np.float64)
            fill = np.nanmean(year) if np.any(np.isfinite(year)) else 0.0
            columns.append(np.where(np.isfinite(year[rows]), year[rows], fill))
            names.append("item_year")
        columns += [c_count, user_mean, user_days]
        names += ["user_count", "user_mean_rating", "user_days_since_last"]
        G = items.genre_flags
        genre_cols = G[rows]
        # user's genre profile over the training ratings, own item left out
        prof = np.zeros((n_all_users, G.shape[1]), dtype=np.float64)
        np.add.at(prof, f_u, G[items.row_of(F.item)])
        p = prof[c_u] - np.where(own[:, None], genre_cols, 0.0)
        others = np.maximum(c_count - own, 1.0)
        n_g = genre_cols.sum(axis=1)
        share = np.where(n_g > 0, (p * genre_cols).sum(axis=1) / others / np.maximum(n_g, 1), 0.0)
        columns.append(share)
        names.append("user_genre_share")
        genre_names = [f"genre_{g}" for g in items.genres]
    else:
        columns += [c_count, user_mean, user_days]
        names += ["user_count", "user_mean_rating", "user_days_since_last"]
    X = np.column_stack(columns)
    if genre_cols is not None:
        X = np.hstack([X, genre_cols])
    return X.astype(np.float32), names + genre_names


def _dataset(split: TimeSplit, cands: Candidates, items: Items | None, chunk_rows: int = 250_000):
    """The RankingDataset of candidate rows, features computed a block of users at a time (a
    full-catalogue list set has n_users × n_items rows: the blocks bound the temporaries)."""
    from rankwise.data.dataset import RankingDataset

    bounds = np.flatnonzero(np.diff(cands.user)) + 1
    starts = np.concatenate([[0], bounds])
    cuts = [0]
    for b in starts[1:]:
        if b - cuts[-1] >= chunk_rows:
            cuts.append(int(b))
    cuts.append(len(cands.user))
    blocks = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        part = Candidates(cands.user[a:b], cands.item[a:b], cands.label[a:b], cands.positive[a:b], cands.part)
        X, names = candidate_features(split, part, items)
        blocks.append(X)
    X = blocks[0] if len(blocks) == 1 else np.vstack(blocks)
    return RankingDataset.from_arrays(X, cands.label, cands.user, doc_ids=cands.item.astype(str),
                                      feature_names=names, allow_nan=False)


def recommendation_data(ratings: Ratings, items: Items | None = None, *, test_fraction: float = 0.2,
                        n_negatives: int = 100, relevance: str = "rating", min_train: int = 1, random_state=0,
                        test_negatives=None):
    """Ratings → ``(train, test)`` RankingDatasets: time split, candidate lists, leak-free features.

    Query id = user id, doc id = item id, label = the rating of a rated item (``relevance="rating"``)
    or 1 (``"binary"``), 0 for a negative. Training lists: each user's training ratings plus
    ``n_negatives`` negatives; test lists: the test ratings of each user with a cutoff, plus
    ``test_negatives`` negatives (default: ``n_negatives``; ``"all"``: every item the user never
    rated, i.e. the **full catalogue** less the user's training items — Krichene and Rendle, KDD
    2020). See :func:`temporal_split`, :func:`sample_candidates` and :func:`candidate_features`;
    the seed drives both samplings (training and test negatives come from independent streams of it).
    """
    if test_negatives is None:
        test_negatives = n_negatives
    _check_n_negatives(n_negatives, "n_negatives")
    _check_n_negatives(test_negatives, "test_negatives")
    split = temporal_split(ratings, test_fraction=test_fraction, min_train=min_train)
    seeds = np.random.SeedSequence(random_state if isinstance(random_state, (int, np.integer)) else None)
    if isinstance(random_state, np.random.Generator):
        seeds = np.random.SeedSequence(int(random_state.integers(0, 2**63 - 1)))
    elif random_state is not None and not isinstance(random_state, (int, np.integer)):
        raise InputError(f"random_state must be an int, a numpy Generator or None; got {random_state!r}")
    g_train, g_test = (np.random.default_rng(s) for s in seeds.spawn(2))
    out = []
    for part, rng, n in (("train", g_train, n_negatives), ("test", g_test, test_negatives)):
        c = sample_candidates(split, part=part, n_negatives=n, relevance=relevance, random_state=rng)
        out.append(_dataset(split, c, items))
    return out[0], out[1]


def serving_data(ratings: Ratings, items: Items | None = None, *, as_of=None, users=None, catalog=None):
    """Candidate lists to recommend from **now**: every item each user has not rated, with the features
    of :func:`candidate_features` computed *as of* ``as_of`` from the ratings made before it.

    This is the serving side of :func:`recommendation_data`: a model trained on its training lists
    scores these rows the way it scored its test lists, with ``as_of`` in the place of a user's
    cutoff. Nothing at or after ``as_of`` reaches a feature or decides what counts as rated.

    Parameters
    ----------
    ratings : Ratings
    items : Items, optional
        Genre flags and years (the same ``items`` the model was trained with).
    as_of : int, optional
        A Unix time; default: one second after the latest rating (recommend after the last rating).
    users : array of user ids, optional
        The users to recommend to (default: every user with a rating before ``as_of``); a user with
        no rating before it gets the cold-start values (count 0, the global mean).
    catalog : array of item ids, optional
        The items to recommend from (default: every item rated before ``as_of``).

    Returns
    -------
    RankingDataset
        Query id = user id, doc id = item id, label 0; rows of a user in item id order, users in
        increasing id order.
    """
    if not isinstance(ratings, Ratings):
        raise InputError(f"ratings must be a rankwise.data.recsys.Ratings; got {type(ratings).__name__}")
    if len(ratings) == 0:
        raise InputError("ratings is empty")
    if as_of is None:
        t = int(ratings.timestamp.max()) + 1
    else:
        if isinstance(as_of, bool) or not isinstance(as_of, (int, np.integer)) or as_of < 0:
            raise InputError(f"as_of must be a Unix time (an integer >= 0); got {as_of!r}")
        t = int(as_of)
    past = ratings.subset(ratings.timestamp < t)
    if len(past) == 0:
        raise InputError(f"no rating is earlier than as_of={t}; nothing to compute features from")
    users = np.unique(past.user) if users is None else np.unique(_int_ids(users, "users"))
    if len(users) == 0:
        raise InputError("users is empty")
    catalog = np.unique(past.item) if catalog is None else np.unique(_int_ids(catalog, "catalog"))
    seen_of = _rated_by(past, users)
    lists = [catalog[~np.isin(catalog, seen_of(j))] for j in range(len(users))]
    sizes = np.array([len(x) for x in lists])
    item = np.concatenate(lists).astype(np.int64)
    if len(item) == 0:
        raise InputError(f"the {len(users)} users have rated every item of the catalogue ({len(catalog)} items) "
                         "before as_of: nothing is left to recommend")
    cands = Candidates(np.repeat(users, sizes), item, np.zeros(len(item)), np.zeros(len(item), bool), "test")
    split = TimeSplit(past, past.subset(np.zeros(len(past), bool)), users, np.full(len(users), t, dtype=np.int64))
    return _dataset(split, cands, items)
