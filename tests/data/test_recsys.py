"""rankwise.data.recsys: per-user time split, sampled candidates, leak-free features (against a naive reference)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from rankwise.data.recsys import (Items, Ratings, candidate_features, recommendation_data, sample_candidates,
                                  temporal_split)
from rankwise.errors import InputError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reference.recsys_reference import features_naive, temporal_split_naive  # noqa: E402


def random_ratings(seed, n_users=12, n_items=15, p=0.45, half_stars=False):
    """Random ratings with ties in time (many ratings share a second) and cold items."""
    rng = np.random.default_rng(seed)
    u, i = np.nonzero(rng.random((n_users, n_items)) < p)
    # ids are not 1..n and reach 10**17: nothing may be indexed or sized by an id
    ids_u = rng.choice(np.arange(1, 10**6), size=n_users, replace=False) * 10**11
    ids_i = rng.choice(np.arange(1, 10**6), size=n_items, replace=False) * 10**11 + 1
    r = rng.integers(1, 11, size=len(u)) / 2 if half_stars else rng.integers(1, 6, size=len(u)).astype(float)
    ts = rng.integers(0, 40, size=len(u)) * 3600 + 10**9
    G = (rng.random((n_items, 4)) < 0.35).astype(np.float32)
    year = rng.integers(1950, 2000, size=n_items).astype(float)
    year[0] = np.nan
    return Ratings(ids_u[u], ids_i[i], r, ts), Items(ids_i, G, ["a", "b", "c", "d"], year=year)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("fraction", [0.2, 0.5])
def test_temporal_split_matches_the_definition(seed, fraction):
    R, _ = random_ratings(seed)
    sp = temporal_split(R, test_fraction=fraction, min_train=2)
    tr, te, cut = temporal_split_naive(R.user, R.item, R.rating, R.timestamp, fraction, min_train=2)
    key = lambda rr: sorted(zip(rr.user.tolist(), rr.item.tolist()))  # noqa: E731
    assert key(sp.train) == sorted(zip(R.user[tr].tolist(), R.item[tr].tolist()))
    assert key(sp.test) == sorted(zip(R.user[te].tolist(), R.item[te].tolist()))
    assert dict(zip(sp.users.tolist(), sp.cutoff.tolist())) == cut
    # no test rating of a user is earlier than or simultaneous with one of their training ratings
    for u in np.unique(sp.test.user):
        assert sp.test.timestamp[sp.test.user == u].min() > sp.train.timestamp[sp.train.user == u].max()


@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize("part", ["train", "test"])
def test_features_match_the_naive_definition(seed, part):
    R, items = random_ratings(seed, half_stars=seed == 3)
    sp = temporal_split(R, test_fraction=0.3)
    c = sample_candidates(sp, part=part, n_negatives=4, random_state=seed)
    X, names = candidate_features(sp, c, items)
    tr_rows, _, cut = temporal_split_naive(R.user, R.item, R.rating, R.timestamp, 0.3)
    genres = {int(i): items.genre_flags[k] for k, i in enumerate(items.ids)}
    years = {int(i): items.year[k] for k, i in enumerate(items.ids)}
    want = features_naive(tr_rows, R.user, R.item, R.rating, R.timestamp, cut, c.user, c.item, genres, years)
    assert names == ["item_count", "item_mean_rating", "item_days_since_last", "item_days_since_first",
                     "item_year", "user_count", "user_mean_rating", "user_days_since_last", "user_genre_share",
                     "genre_a", "genre_b", "genre_c", "genre_d"]
    np.testing.assert_allclose(X, want.astype(np.float32), rtol=1e-6, atol=1e-6)


def test_features_do_not_see_the_test_period():
    """Changing every test rating, and every training rating made after a user's cutoff, leaves
    that user's features unchanged (training and test lists alike)."""
    R, items = random_ratings(5, n_users=20, n_items=25)
    a_tr, a_te = recommendation_data(R, items, test_fraction=0.25, n_negatives=6, random_state=1)
    sp = temporal_split(R, test_fraction=0.25)
    test_pairs = set(zip(sp.test.user.tolist(), sp.test.item.tolist()))
    is_test = np.array([(u, i) in test_pairs for u, i in zip(R.user.tolist(), R.item.tolist())])
    flipped = np.where(is_test, 6.0 - R.rating, R.rating)  # 1 <-> 5, 2 <-> 4
    b_tr, b_te = recommendation_data(Ratings(R.user, R.item, flipped, R.timestamp), items, test_fraction=0.25,
                                     n_negatives=6, random_state=1)
    np.testing.assert_array_equal(a_tr.X, b_tr.X)
    np.testing.assert_array_equal(a_te.X, b_te.X)
    assert not np.array_equal(a_te.labels, b_te.labels)  # the test labels did change
    # a user's features ignore training ratings made after that user's cutoff
    u0 = int(sp.users[np.argmin(sp.cutoff)])  # the earliest cutoff
    t0 = int(sp.cutoff.min())
    later = (R.timestamp >= t0) & ~is_test
    assert later.any()
    c_tr, c_te = recommendation_data(Ratings(R.user, R.item, np.where(later, 6.0 - R.rating, R.rating), R.timestamp),
                                     items, test_fraction=0.25, n_negatives=6, random_state=1)
    rows = a_te.qid == u0
    np.testing.assert_array_equal(a_te.X[rows], c_te.X[rows])


def test_candidates_rules_and_seed():
    R, _ = random_ratings(7, n_users=15, n_items=30)
    sp = temporal_split(R, test_fraction=0.3)
    a = sample_candidates(sp, part="test", n_negatives=5, random_state=3)
    b = sample_candidates(sp, part="test", n_negatives=5, random_state=3)
    c = sample_candidates(sp, part="test", n_negatives=5, random_state=4)
    np.testing.assert_array_equal(a.item, b.item)
    assert not np.array_equal(a.item, c.item)
    everything = set(zip(R.user.tolist(), R.item.tolist()))
    train_pairs = set(zip(sp.train.user.tolist(), sp.train.item.tolist()))
    for u in np.unique(a.user):
        rows = a.user == u
        pos = set(a.item[rows & a.positive].tolist())
        assert pos == set(sp.test.item[sp.test.user == u].tolist())
        neg = a.item[rows & ~a.positive]
        assert len(neg) == len(set(neg.tolist())) == min(5, 30 - sum(1 for uu, _ in everything if uu == u))
        assert not any((u, i) in everything for i in neg.tolist())  # test negatives: never rated
        assert np.all(a.label[rows & ~a.positive] == 0)
    t = sample_candidates(sp, part="train", n_negatives=30, relevance="binary", random_state=0)
    for u in np.unique(t.user):
        neg = t.item[(t.user == u) & ~t.positive]
        assert not any((u, i) in train_pairs for i in neg.tolist())  # training negatives: not rated in training
    assert set(np.unique(t.label)) <= {0.0, 1.0}


def test_negatives_are_uniform():
    """Each free item is drawn with the same probability (chi-square over many seeds)."""
    R = Ratings([1, 1, 1], [1, 2, 3], [5, 4, 3], [1, 2, 3])
    sp = temporal_split(R, test_fraction=0.34)
    counts = np.zeros(13)
    for seed in range(400):
        c = sample_candidates(sp, part="test", n_negatives=3, catalog=np.arange(1, 14), random_state=seed)
        np.add.at(counts, c.item[~c.positive] - 1, 1)
    assert counts[:3].sum() == 0  # rated items are never negatives
    free = counts[3:]
    expected = 400 * 3 / 10
    chi2 = ((free - expected) ** 2 / expected).sum()
    assert chi2 < 27.9  # 99.9% quantile of chi-square with 9 degrees of freedom


def test_bad_arguments():
    R, _ = random_ratings(0)
    with pytest.raises(InputError, match=r"test_fraction must be a number in \(0, 1\); got 1.5"):
        temporal_split(R, test_fraction=1.5)
    with pytest.raises(InputError, match="min_train must be an integer >= 1"):
        temporal_split(R, min_train=0)
    sp = temporal_split(R)
    with pytest.raises(InputError, match="part must be 'train' or 'test'"):
        sample_candidates(sp, part="valid")
    with pytest.raises(InputError, match="n_negatives must be an integer >= 0"):
        sample_candidates(sp, n_negatives=-1)
    with pytest.raises(InputError, match=r"row 1: user 1 rates item 2 again \(first at row 0\)"):
        Ratings([1, 1], [2, 2], [3, 4], [0, 1])
    with pytest.raises(InputError, match="row 0: user id -1 is not valid"):
        Ratings([-1], [2], [3], [0])
    with pytest.raises(InputError, match="rating is NaN"):
        Ratings([1], [2], [np.nan], [0])
    with pytest.raises(InputError, match=r"item has shape \(2,\); expected \(1,\)"):
        Ratings([1], [2, 3], [3], [0])


def test_users_whose_ratings_share_one_second_stay_in_training():
    R = Ratings([1, 1, 1, 2, 2], [1, 2, 3, 1, 2], [5, 4, 3, 2, 1], [7, 7, 7, 1, 9])
    sp = temporal_split(R, test_fraction=0.5)
    assert sp.users.tolist() == [2] and sp.test.user.tolist() == [2] and sp.test.item.tolist() == [2]
    assert sp.cutoff_of([1, 2]).tolist() == [8, 9]  # user 1: one second after the last rating


def test_recommendation_data_on_movielens_100k(ml_dir):
    from rankwise.data.movielens import load_movielens

    ml = load_movielens(ml_dir)
    train, test = recommendation_data(ml.ratings, ml.items, test_fraction=0.2, n_negatives=50, random_state=0)
    sp = temporal_split(ml.ratings, test_fraction=0.2)
    assert train.n_queries == 943 and test.n_queries == len(sp.users) == 943
    assert int((train.labels > 0).sum()) == len(sp.train) and int((test.labels > 0).sum()) == len(sp.test)
    assert len(sp.train) + len(sp.test) == 100_000
    assert np.all(test.query_sizes == np.bincount(sp.test.user)[sp.users] + 50)
    assert np.all(np.isfinite(train.X)) and np.all(np.isfinite(test.X))
    assert train.n_features == 9 + 19


# ---------------------------------------------------------------- full catalogue and "as of now"

def _ndcg10_brute(scores, labels):
    """NDCG@10 of one list with distinct scores, exp2 gain, log2 discount (the textbook formula)."""
    order = sorted(range(len(scores)), key=lambda r: -scores[r])
    dcg = sum((2.0 ** labels[r] - 1) / np.log2(k + 2) for k, r in enumerate(order[:10]))
    ideal = sorted(labels, reverse=True)
    idcg = sum((2.0 ** g - 1) / np.log2(k + 2) for k, g in enumerate(ideal[:10]))
    return dcg / idcg if idcg > 0 else 0.0


@pytest.mark.parametrize("seed", [0, 1, 4])
def test_full_catalogue_test_lists_and_ndcg_against_brute_force(seed):
    """test_negatives="all": each test list is the whole catalogue less the user's training items
    (test items labelled with their rating, the rest 0), with the documented features; NDCG@10 over
    these lists equals a brute-force loop over every (user, item) pair."""
    from rankwise.metrics import ndcg

    R, items = random_ratings(seed, n_users=14, n_items=23, half_stars=seed == 1)
    train, test = recommendation_data(R, items, test_fraction=0.3, n_negatives=3, test_negatives="all",
                                      random_state=seed)
    tr_rows, te_rows, cut = temporal_split_naive(R.user, R.item, R.rating, R.timestamp, 0.3)
    catalogue = sorted(set(R.item.tolist()))
    want_user, want_item, want_label = [], [], []
    for u in sorted(cut):
        trained = {int(R.item[r]) for r in tr_rows if R.user[r] == u}
        tested = {int(R.item[r]): float(R.rating[r]) for r in te_rows if R.user[r] == u}
        for i in catalogue:
            if i not in trained:
                want_user.append(u)
                want_item.append(i)
                want_label.append(tested.get(i, 0.0))
    got = sorted(zip(test.qid.tolist(), test.doc_ids.astype(np.int64).tolist(), test.labels.tolist()))
    assert got == sorted(zip(want_user, want_item, want_label))
    genres = {int(i): items.genre_flags[k] for k, i in enumerate(items.ids)}
    years = {int(i): items.year[k] for k, i in enumerate(items.ids)}
    want_X = features_naive(tr_rows, R.user, R.item, R.rating, R.timestamp, cut, test.qid,
                            test.doc_ids.astype(np.int64), genres, years)
    np.testing.assert_allclose(test.X, want_X.astype(np.float32), rtol=1e-6, atol=1e-6)
    # the sampled lists of the same seed are part of the full ones, with the same positives
    _, sampled = recommendation_data(R, items, test_fraction=0.3, n_negatives=3, random_state=seed)
    full_pairs = set(zip(test.qid.tolist(), test.doc_ids.tolist()))
    assert set(zip(sampled.qid.tolist(), sampled.doc_ids.tolist())) <= full_pairs
    assert len(test) > len(sampled)
    # NDCG@10 of an item-level score (distinct values) against the brute-force loop
    rng = np.random.default_rng(seed)
    item_score = dict(zip(catalogue, rng.permutation(len(catalogue)).tolist()))
    scores = np.array([item_score[int(i)] for i in test.doc_ids.astype(np.int64)], dtype=float)
    per_user = [_ndcg10_brute([item_score[i] for uu, i in zip(want_user, want_item) if uu == u],
                              [g for uu, g in zip(want_user, want_label) if uu == u]) for u in sorted(cut)]
    got = ndcg(scores, test.labels, qid=test.qid, k=10, gain="exp2", ties="average", empty=0.0)
    assert float(got) == pytest.approx(np.mean(per_user), abs=1e-12)


def test_full_catalogue_blocks_give_the_same_features():
    """Features computed a block of users at a time (bounded memory) equal one whole computation."""
    from rankwise.data.recsys import _dataset

    R, items = random_ratings(2, n_users=30, n_items=40)
    sp = temporal_split(R, test_fraction=0.25)
    c = sample_candidates(sp, part="test", n_negatives="all")
    X, names = candidate_features(sp, c, items)
    for rows in (1, 7, 50, 10**6):
        ds = _dataset(sp, c, items, chunk_rows=rows)
        np.testing.assert_array_equal(ds.X, X)
        assert list(ds.feature_names) == names


def _naive_serving(R, items, t, users=None):
    """serving_data from its definition: every item rated before t that the user has not rated
    before t, features by the naive loop with every user's cutoff at t."""
    before = [r for r in range(len(R)) if R.timestamp[r] < t]
    users = sorted({int(R.user[r]) for r in before}) if users is None else sorted(users)
    catalogue = sorted({int(R.item[r]) for r in before})
    cu, ci = [], []
    for u in users:
        rated = {int(R.item[r]) for r in before if R.user[r] == u}
        for i in catalogue:
            if i not in rated:
                cu.append(u)
                ci.append(i)
    genres = {int(i): items.genre_flags[k] for k, i in enumerate(items.ids)}
    years = {int(i): items.year[k] for k, i in enumerate(items.ids)}
    X = features_naive(before, R.user, R.item, R.rating, R.timestamp, {u: t for u in users},
                       np.array(cu), np.array(ci), genres, years)
    return np.array(cu), np.array(ci), X


@pytest.mark.parametrize("seed", [0, 3])
def test_serving_features_as_of_now_match_the_definition(seed):
    from rankwise.data.recsys import serving_data

    R, items = random_ratings(seed, n_users=12, n_items=18, half_stars=seed == 3)
    t_mid = int(np.median(R.timestamp))
    for t in (None, t_mid):
        ds = serving_data(R, items, as_of=t)
        tt = int(R.timestamp.max()) + 1 if t is None else t
        u, i, X = _naive_serving(R, items, tt)
        assert ds.qid.tolist() == u.tolist() and ds.doc_ids.astype(np.int64).tolist() == i.tolist()
        np.testing.assert_allclose(ds.X, X.astype(np.float32), rtol=1e-6, atol=1e-6)
        assert np.all(ds.labels == 0)
    # after the last rating (the default): nothing the user rated is recommended again
    ds = serving_data(R, items)
    rated = set(zip(R.user.tolist(), R.item.tolist()))
    assert not any(p in rated for p in zip(ds.qid.tolist(), ds.doc_ids.astype(np.int64).tolist()))
    some = [int(R.user[0]), int(R.user[-1]), 5]  # 5: a user with no rating (cold start)
    sub = serving_data(R, items, users=some)
    u, i, X = _naive_serving(R, items, int(R.timestamp.max()) + 1, users=some)
    assert sub.qid.tolist() == u.tolist()
    np.testing.assert_allclose(sub.X, X.astype(np.float32), rtol=1e-6, atol=1e-6)


def test_serving_features_do_not_see_the_future():
    """Ratings at or after as_of — changed, removed, or new ones by new users of new items — change
    no row and no feature."""
    from rankwise.data.recsys import serving_data

    R, items = random_ratings(6, n_users=20, n_items=25)
    t = int(np.quantile(R.timestamp, 0.6))
    a = serving_data(R, items, as_of=t)
    future = R.timestamp >= t
    assert future.any() and (~future).any()
    flipped = Ratings(R.user, R.item, np.where(future, 6.0 - R.rating, R.rating),
                      np.where(future, R.timestamp + 10**6, R.timestamp))
    kept = R.subset(~future)
    new_item = int(items.ids[0])
    more = Ratings(np.concatenate([R.user, [7]]), np.concatenate([R.item, [new_item]]),
                   np.concatenate([R.rating, [5.0]]), np.concatenate([R.timestamp, [t]]))
    for other in (flipped, kept, more):
        b = serving_data(other, items, as_of=t)
        np.testing.assert_array_equal(a.X, b.X)
        np.testing.assert_array_equal(a.qid, b.qid)
        np.testing.assert_array_equal(a.doc_ids, b.doc_ids)
    # and the future does count once as_of moves past it
    c = serving_data(flipped, items, as_of=int(flipped.timestamp.max()) + 1)
    assert len(c) != len(a) or not np.array_equal(c.X, a.X)


def test_full_catalogue_and_serving_bad_arguments():
    from rankwise.data.recsys import serving_data

    R, items = random_ratings(0)
    with pytest.raises(InputError, match="test_negatives must be an integer >= 0 or 'all'"):
        recommendation_data(R, items, test_negatives="everything")
    with pytest.raises(InputError, match="n_negatives must be an integer >= 0 or 'all'"):
        sample_candidates(temporal_split(R), n_negatives=-1)
    with pytest.raises(InputError, match="no rating is earlier than as_of=0"):
        serving_data(R, items, as_of=0)
    with pytest.raises(InputError, match="as_of must be a Unix time"):
        serving_data(R, items, as_of=1.5)
    with pytest.raises(InputError, match="users is empty"):
        serving_data(R, items, users=[])
    everything = Ratings([1, 1, 2], [10, 11, 10], [4.0, 3.0, 5.0], [100, 200, 300])
    with pytest.raises(InputError, match="nothing is left to recommend"):
        serving_data(everything, users=[1])
