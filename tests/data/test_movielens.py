"""MovieLens readers (100k, 1M, latest), the official 100k splits as ranking, and hostile MovieLens input.

Small fixtures for the 1M and "latest" layouts are written here (only MovieLens 100k is in the
shared data); the real-data tests skip with a message where ``$RANKWISE_DATA/ml-100k`` is absent.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rankwise.data import load_movielens_100k
from rankwise.data.movielens import (load_movielens, read_movielens_items, read_movielens_ratings,
                                     read_movielens_users)
from rankwise.errors import DataNotFoundError, InputError, ParseError

GENRES_100K = ["unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime", "Documentary",
               "Drama", "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller",
               "War", "Western"]


# ------------------------------------------------------------------------------ fixtures


def _item_line(i, title="Film (1995)", date="01-Jan-1995", flags=None):
    flags = flags if flags is not None else [0] * 19
    return f"{i}|{title}|{date}||http://x|" + "|".join(map(str, flags))


def write_100k(folder, ratings=None, items=None, users=None, split_test=None):
    """A tiny ml-100k folder: 3 users, 4 items, u.data = u1.base + u1.test."""
    folder.mkdir(parents=True, exist_ok=True)
    genre = "\n".join(f"{g}|{k}" for k, g in enumerate(GENRES_100K)) + "\n\n"
    (folder / "u.genre").write_text(genre)
    if items is None:
        flags = [[0] * 19 for _ in range(4)]
        flags[0][3] = flags[0][4] = 1
        flags[1][1] = 1
        flags[2][8] = 1
        flags[3][0] = 1
        items = [_item_line(1, "Toy Story (1995)", "01-Jan-1995", flags[0]),
                 _item_line(2, "GoldenEye (1995)", "1-Feb-1995", flags[1]),
                 _item_line(3, "Four Rooms (1995)", "01-Jan-1995", flags[2]),
                 _item_line(4, "unknown", "", flags[3])]
    (folder / "u.item").write_text("\n".join(items) + "\n")
    users = users or ["1|24|M|technician|85711", "2|53|F|other|94043", "3|23|M|writer|32067"]
    (folder / "u.user").write_text("\n".join(users) + "\n")
    base = ratings or ["1\t1\t5\t100", "1\t2\t3\t200", "2\t1\t4\t150", "2\t3\t2\t160", "3\t4\t1\t300"]
    test = split_test or ["1\t3\t4\t400", "3\t1\t5\t500"]
    (folder / "u1.base").write_text("\n".join(base) + "\n")
    (folder / "u1.test").write_text("\n".join(test) + "\n")
    (folder / "u.data").write_text("\n".join(base + test) + "\n")
    return folder


def write_1m(folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ratings.dat").write_text("1::1193::5::978300760\n1::661::3::978302109\n2::1193::4::978298413\n"
                                        "2::3408::1::978299000\n")
    (folder / "movies.dat").write_bytes("1193::One Flew Over the Cuckoo's Nest (1975)::Drama\n"
                                        "661::James and the Giant Peach (1996)::Animation|Children's|Musical\n"
                                        "3408::Erin Brockovich (2000)::Drama\n"
                                        "3409::Café au lait (1993)::Comedy\n".encode("latin-1"))
    (folder / "users.dat").write_text("1::F::1::10::48067\n2::M::56::16::70072\n")
    return folder


def write_latest(folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ratings.csv").write_text("userId,movieId,rating,timestamp\n1,1,4.0,964982703\n1,3,4.5,964981247\n"
                                        "2,1,0.5,964982224\n2,193609,3,1537799250\n")
    (folder / "movies.csv").write_text(
        'movieId,title,genres\n1,Toy Story (1995),Adventure|Animation|Children|Comedy|Fantasy\n'
        '3,"American President, The (1995)",Comedy|Drama|Romance\n'
        '193609,Andrew Dice Clay: Dice Rules (1991),Comedy\n'
        '200000,"Something, with ""quotes"" (2019)",(no genres listed)\n', encoding="utf-8")
    return folder


# ------------------------------------------------------------------------------ readers


def test_read_100k_fixture(tmp_path):
    d = write_100k(tmp_path / "ml-100k")
    ml = load_movielens(d)
    assert ml.layout == "100k"
    r = ml.ratings
    assert r.user.tolist() == [1, 1, 2, 2, 3, 1, 3] and r.item.tolist() == [1, 2, 1, 3, 4, 3, 1]
    assert r.rating.tolist() == [5, 3, 4, 2, 1, 4, 5] and r.timestamp.tolist() == [100, 200, 150, 160, 300, 400, 500]
    assert r.line.tolist() == [1, 2, 3, 4, 5, 6, 7]
    it = ml.items
    assert it.genres == GENRES_100K and it.ids.tolist() == [1, 2, 3, 4]
    assert it.genre_flags[0].nonzero()[0].tolist() == [3, 4]  # Animation, Children's
    assert it.year[:3].tolist() == [1995.0, 1995.0, 1995.0] and np.isnan(it.year[3])
    assert ml.users.ids.tolist() == [1, 2, 3] and ml.users.gender.tolist() == ["M", "F", "M"]


def test_read_1m_fixture(tmp_path):
    ml = load_movielens(write_1m(tmp_path / "ml-1m"))
    assert ml.layout == "1m"
    assert ml.ratings.item.tolist() == [1193, 661, 1193, 3408]
    assert ml.ratings.rating.tolist() == [5, 3, 4, 1]
    assert ml.items.genres == sorted(["Drama", "Animation", "Children's", "Musical", "Comedy"])
    assert ml.items.titles[3] == "Café au lait (1993)"  # latin-1, as GroupLens ships it
    assert ml.items.year.tolist() == [1975, 1996, 2000, 1993]
    g = dict(zip(ml.items.genres, ml.items.genre_flags[1]))
    assert g == {"Animation": 1, "Children's": 1, "Comedy": 0, "Drama": 0, "Musical": 1}
    assert ml.users.age.tolist() == [1, 56] and ml.users.gender.tolist() == ["F", "M"]


def test_read_latest_fixture(tmp_path):
    ml = load_movielens(write_latest(tmp_path / "ml-latest-small"))
    assert ml.layout == "latest" and ml.users is None
    assert ml.ratings.rating.tolist() == [4.0, 4.5, 0.5, 3.0]
    assert ml.ratings.line.tolist() == [2, 3, 4, 5]
    assert ml.items.titles[1] == "American President, The (1995)"
    assert ml.items.titles[3] == 'Something, with "quotes" (2019)'
    assert ml.items.genre_flags[3].sum() == 0  # (no genres listed)
    assert "Children" in ml.items.genres and "(no genres listed)" not in ml.items.genres


def test_read_real_100k(ml_dir):
    ml = load_movielens(ml_dir)
    assert len(ml.ratings) == 100_000
    assert len(np.unique(ml.ratings.user)) == 943 and len(np.unique(ml.ratings.item)) == 1682
    assert np.bincount(ml.ratings.rating.astype(int), minlength=6)[1:].tolist() == [6110, 11370, 27145, 34174, 21201]
    assert ml.items.genres == GENRES_100K and ml.items.genre_flags.shape == (1682, 19)
    # the same numbers as pandas reading u.data
    ref = pd.read_csv(ml_dir / "u.data", sep="\t", names=["u", "i", "r", "t"])
    np.testing.assert_array_equal(ml.ratings.user, ref["u"])
    np.testing.assert_array_equal(ml.ratings.timestamp, ref["t"])


def test_layout_from_file_name(tmp_path):
    with pytest.raises(InputError, match="cannot tell the MovieLens layout"):
        read_movielens_ratings(tmp_path / "ratings.txt")
    with pytest.raises(InputError, match="layout must be one of"):
        read_movielens_ratings(tmp_path / "u.data", layout="10m")
    with pytest.raises(DataNotFoundError, match="no u.data .*ratings.dat .*ratings.csv"):
        load_movielens(tmp_path)
    with pytest.raises(DataNotFoundError, match="missing; expected"):
        read_movielens_ratings(tmp_path / "u.data")


# ------------------------------------------------------------------ official 100k splits


def test_movielens_split_counts_and_features(ml_dir):
    tr, te = load_movielens_100k(ml_dir, split="u1")
    assert len(tr) == 80000 and len(te) == 20000
    assert tr.n_queries == 943 and tr.n_features == 23
    assert set(np.unique(tr.labels)) == {1, 2, 3, 4, 5}
    names = tr.feature_names
    assert names[:19] == [f"genre_{g}" for g in GENRES_100K]
    # features recomputed naively from u1.base only (no test leakage)
    base = pd.read_csv(ml_dir / "u1.base", sep="\t", names=["u", "i", "r", "t"])
    item_mean = base.groupby("i")["r"].mean()
    item_cnt = base.groupby("i")["r"].size()
    user_mean = base.groupby("u")["r"].mean()
    gmean = base["r"].mean()
    k_im, k_ic, k_um = names.index("item_mean_rating"), names.index("item_rating_count"), names.index("user_mean_rating")
    items = te.doc_ids.astype(int)
    want_im = np.array([item_mean.get(i, gmean) for i in items], dtype=np.float32)
    want_ic = np.array([item_cnt.get(i, 0) for i in items], dtype=np.float32)
    np.testing.assert_array_equal(te.X[:, k_im], want_im)
    np.testing.assert_array_equal(te.X[:, k_ic], want_ic)
    np.testing.assert_array_equal(te.X[:, k_um], user_mean.loc[te.qid].to_numpy().astype(np.float32))
    assert np.all(np.isfinite(tr.X)) and np.all(np.isfinite(te.X))
    # release year of Toy Story (item 1): 01-Jan-1995
    row = np.flatnonzero(tr.doc_ids == "1")[0]
    assert tr.X[row, names.index("release_year")] == 1995 and tr.X[row, names.index("genre_Animation")] == 1
    # item 267 has no release date: it gets the mean release year of the items rated in u1.base
    # (not of every item: that would use the test part)
    info = pd.read_csv(ml_dir / "u.item", sep="|", header=None, encoding="latin-1")
    year = pd.to_numeric(info[2].astype(str).str[-4:], errors="coerce")
    assert year[info[0] == 267].isna().all()
    want_year = np.float32(year[info[0].isin(base["i"].unique())].mean())
    assert want_year != np.float32(year.mean())  # the two rules really differ on this split
    for part in (tr, te):
        rows = np.flatnonzero(part.doc_ids == "267")
        assert len(rows) and np.all(part.X[rows, names.index("release_year")] == want_year)


def test_movielens_bad_split(ml_dir):
    with pytest.raises(InputError, match="split must be one of"):
        load_movielens_100k(ml_dir, split="u9")


@pytest.mark.parametrize("split, n_train, n_test", [(f"u{k}", 80000, 20000) for k in range(1, 6)]
                         + [("ua", 90570, 9430), ("ub", 90570, 9430)])
def test_movielens_every_split_matches_sources(ml_dir, split, n_train, n_test):
    """SOURCES.md: 100,000 ratings, 943 users, 1,682 items, ratings 1-5: 6,110/11,370/27,145/34,174/21,201."""
    tr, te = load_movielens_100k(ml_dir, split=split)
    assert (len(tr), len(te)) == (n_train, n_test)
    labels = np.concatenate([tr.labels, te.labels]).astype(int)
    assert np.bincount(labels, minlength=6)[1:].tolist() == [6110, 11370, 27145, 34174, 21201]
    users = np.union1d(tr.query_ids, te.query_ids)
    items = np.union1d(tr.doc_ids.astype(int), te.doc_ids.astype(int))
    assert (len(users), users.min(), users.max()) == (943, 1, 943)
    assert (len(items), items.min(), items.max()) == (1682, 1, 1682)
    if split in ("ua", "ub"):
        assert np.all(te.query_sizes == 10)


def test_official_split_on_fixture_indexes_items_by_row(tmp_path):
    """Item ids need not be 1..n: features come from the item's row, never from the id as an index."""
    d = write_100k(tmp_path / "ml-100k")
    tr, te = load_movielens_100k(d, split="u1")
    assert te.doc_ids.tolist() == ["3", "1"] and te.query_ids.tolist() == [1, 3]
    g = tr.feature_names.index("genre_Drama")
    assert te.X[0, g] == 1 and te.X[1, tr.feature_names.index("genre_Animation")] == 1
    # item 3 is rated once in u1.base (rating 2); item 1 twice (5, 4)
    assert te.X[:, tr.feature_names.index("item_rating_count")].tolist() == [1, 2]
    assert te.X[:, tr.feature_names.index("item_mean_rating")].tolist() == [2.0, 4.5]


# ------------------------------------------------------------------- hostile input (issue 17)


def _u1_base_with(tmp_path, line, *, where="u1.base"):
    """The fixture folder with one more line appended to ``where``; returns (folder, its line number)."""
    d = write_100k(tmp_path / "ml-100k")
    f = d / where
    lines = f.read_text().splitlines()
    f.write_text("\n".join(lines + [line]) + "\n")
    return d, len(lines) + 1


@pytest.mark.parametrize("line, message", [
    ("1\t4\t99\t10", r"rating '99' is not valid; expected a whole-star rating 1\.\.5"),
    ("1\t4\t0\t10", r"rating '0' is not valid; expected a whole-star rating 1\.\.5"),
    ("1\t4\t3.5\t10", r"rating '3\.5' is not valid"),
    ("0\t4\t3\t10", r"user id 0 is not valid; MovieLens ids start at 1"),
    ("1\t0\t3\t10", r"item id 0 is not valid"),
    ("1\t-4\t3\t10", r"item id '-4' is not a positive integer"),
    ("-1\t4\t3\t10", r"user id '-1' is not a positive integer"),
    ("1\t4\t3\t-10", r"timestamp '-10' is not a non-negative integer"),
    ("1\t٤\t3\t10", r"item id '.*' is not a positive integer in ASCII digits"),  # latin-1: bytes as read
    ("1\t４\t3\t10", r"item id '.*' is not a positive integer in ASCII digits"),
    ("1\t1_0\t3\t10", r"item id '1_0' is not a positive integer"),
    ("1\t+4\t3\t10", r"item id '\+4' is not a positive integer"),
    ("9223372036854775808\t4\t3\t10", r"user id 9223372036854775808 does not fit in int64"),
    ("1\t4\t3", r"3 fields separated by '\\t'; expected 'user<TAB>item<TAB>rating<TAB>timestamp'"),
    ("1\t2\t5\t999", r"user 1 rates item 2 again \(first at line 2\); expected one rating per \(user, item\)"),
    ("1\t1000000000\t3\t10", r"item id 1000000000 is not in .*u\.item"),
    ("1000000000\t4\t3\t10", r"user id 1000000000 is not in .*u\.user"),
    ("1\t5\t3\t10", r"item id 5 is not in .*u\.item"),
])
def test_bad_100k_ratings_are_rejected_with_path_and_line(tmp_path, line, message):
    """Before the validated readers: rating 99/0, id 0 and duplicates were accepted, a negative id
    indexed another item's features, an id of 10**9 ran out of memory in bincount."""
    d, k = _u1_base_with(tmp_path, line)
    with pytest.raises(ParseError, match=message) as info:
        load_movielens_100k(d, split="u1")
    assert str(info.value).startswith(f"{d / 'u1.base'}:{k}: ")
    assert info.value.line == k


def test_pair_in_both_parts_of_a_split(tmp_path):
    d, k = _u1_base_with(tmp_path, "1\t3\t2\t50")  # user 1 rates item 3 in u1.test too (line 1)
    with pytest.raises(ParseError, match=r"u1\.test:1: user 1 rates item 3 here and in .*u1\.base:6; "
                                         "expected the two parts of a split to be disjoint"):
        load_movielens_100k(d, split="u1")


def test_large_ids_cost_no_memory(tmp_path):
    """A 10**9 or int64-max id is an id, not an array length (no MemoryError, no OverflowError)."""
    f = tmp_path / "u.data"
    f.write_text(f"1000000000\t1\t5\t10\n1\t{2**63 - 1}\t4\t20\n")
    r = read_movielens_ratings(f)
    assert r.user.tolist() == [10**9, 1] and r.item.tolist() == [1, 2**63 - 1]


@pytest.mark.parametrize("raw, line, message", [
    (b"1\t1\t5\t10\r2\t1\t5\t10\r", 1, "carriage return without line feed"),
    (b"1\t1\t5\t10\r\n2\t1\t5\t10\n", 2, "mixed line endings"),
    (b"\xef\xbb\xbf1\t1\t5\t10\n", 1, "byte-order mark"),
    (b"1\t1\t5\t10\n2\t1\x00\t5\t10\n", 2, "NUL byte"),
    (b"", None, "no ratings"),
])
def test_malformed_files(tmp_path, raw, line, message):
    f = tmp_path / "u.data"
    f.write_bytes(raw)
    with pytest.raises(ParseError, match=message) as info:
        read_movielens_ratings(f)
    assert info.value.line == line


def test_crlf_files_are_read(tmp_path):
    f = tmp_path / "u.data"
    f.write_bytes(b"1\t1\t5\t10\r\n2\t1\t4\t10\r\n")
    assert read_movielens_ratings(f).rating.tolist() == [5, 4]


@pytest.mark.parametrize("rating, ok", [("0.5", True), ("5.0", True), ("3", True), ("4.5", True),
                                         ("0.0", False), ("5.5", False), ("0.25", False), ("3.7", False),
                                         ("99", False), ("nan", False), ("-1.0", False), ("1e0", False)])
def test_latest_half_star_ratings(tmp_path, rating, ok):
    f = tmp_path / "ratings.csv"
    f.write_text(f"userId,movieId,rating,timestamp\n1,1,4.0,10\n2,1,{rating},20\n")
    if ok:
        assert read_movielens_ratings(f).rating[1] == float(rating)
    else:
        with pytest.raises(ParseError, match=rf"ratings\.csv:3: rating '{rating}' is not valid; expected 0\.5\.\.5\.0 "
                                             "in half stars"):
            read_movielens_ratings(f)


def test_latest_header_and_items(tmp_path):
    d = write_latest(tmp_path / "ml-latest")
    (d / "ratings.csv").write_text("user,movie,rating,ts\n1,1,4.0,10\n")
    with pytest.raises(ParseError, match=r"ratings\.csv:1: header 'user,movie,rating,ts'; expected "
                                         "'userId,movieId,rating,timestamp'"):
        load_movielens(d)
    (d / "ratings.csv").write_text("userId,movieId,rating,timestamp\n1,1,4.0,10\n1,2,4.0,10\n")
    with pytest.raises(ParseError, match=r"ratings\.csv:3: item id 2 is not in .*movies\.csv"):
        load_movielens(d)
    (d / "movies.csv").write_text('movieId,title,genres\n1,"Unclosed (1995),Comedy\n')
    with pytest.raises(ParseError, match=r"movies\.csv:\d+: .*expected 'movieId,title,genres'"):
        read_movielens_items(d / "movies.csv")
    (d / "movies.csv").write_text("movieId,title,genres\n1,A (1995),Comedy\n1,B (1996),Drama\n")
    with pytest.raises(ParseError, match=r"movies\.csv:3: item id 1 is listed again \(first at line 2\)"):
        read_movielens_items(d / "movies.csv")


def test_1m_rules(tmp_path):
    d = write_1m(tmp_path / "ml-1m")
    (d / "ratings.dat").write_text("1::1193::5::978300760\n1::661::6::978302109\n")
    with pytest.raises(ParseError, match=r"ratings\.dat:2: rating '6' is not valid; expected a whole-star rating "
                                         r"1\.\.5 \(MovieLens 1m\)"):
        load_movielens(d)
    (d / "ratings.dat").write_text("1::1193::5::978300760\n3::661::4::978302109\n")
    with pytest.raises(ParseError, match=r"ratings\.dat:2: user id 3 is not in .*users\.dat"):
        load_movielens(d)
    (d / "users.dat").write_text("1::X::1::10::48067\n")
    with pytest.raises(ParseError, match=r"users\.dat:1: gender 'X'; expected 'M' or 'F'"):
        read_movielens_users(d / "users.dat")
    (d / "movies.dat").write_text("1::Title (1995)::Drama||Comedy\n")
    with pytest.raises(ParseError, match=r"movies\.dat:1: genres 'Drama\|\|Comedy'"):
        read_movielens_items(d / "movies.dat")


def test_100k_item_file_rules(tmp_path):
    d = write_100k(tmp_path / "ml-100k", items=[_item_line(1), _item_line(2, flags=[2] + [0] * 18)])
    with pytest.raises(ParseError, match=r"u\.item:2: genre flag '2'; expected 0 or 1"):
        read_movielens_items(d / "u.item")
    d = write_100k(tmp_path / "b", items=[_item_line(1), _item_line(1)])
    with pytest.raises(ParseError, match=r"u\.item:2: item id 1 is listed again \(first at line 1\)"):
        read_movielens_items(d / "u.item")
    d = write_100k(tmp_path / "c", items=[_item_line(1, date="1995")])
    with pytest.raises(ParseError, match=r"u\.item:1: release date '1995'"):
        read_movielens_items(d / "u.item")
    d = write_100k(tmp_path / "d", items=[_item_line(1) + "|0"])
    with pytest.raises(ParseError, match=r"u\.item:1: 25 '\|'-separated fields; expected 24"):
        read_movielens_items(d / "u.item")
