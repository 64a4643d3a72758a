"""MovieLens files: validated readers for the 100k, 1M and "latest" layouts, and MovieLens 100k as ranking.

Layouts (F. M. Harper and J. A. Konstan, 2015; the README of each GroupLens release):

========  ============================================  ==============================  ==================
layout    ratings                                       items                           users
========  ============================================  ==============================  ==================
100k      ``u.data`` (``*.base``/``*.test``):           ``u.item`` (``id|title|date|``   ``u.user``
          ``user<TAB>item<TAB>rating<TAB>timestamp``    ``video date|url|19 flags``)     (``id|age|gender|``
          ratings 1..5                                  + ``u.genre``                    ``occupation|zip``)
1m        ``ratings.dat``: ``user::item::rating::ts``   ``movies.dat``                   ``users.dat``
          ratings 1..5                                  (``id::title::G1|G2``)           (``id::gender::age::``
                                                                                         ``occupation::zip``)
latest    ``ratings.csv`` with the header               ``movies.csv`` (``movieId,``     —
          ``userId,movieId,rating,timestamp``;          ``title,genres``; titles quoted
          ratings 0.5..5.0 in half stars                by CSV rules)
========  ============================================  ==============================  ==================

Rules checked on every line (a violation is a :class:`~rankwise.errors.ParseError` naming
``path:line``, what came and what the format expects): ids are positive integers written in
ASCII digits (no sign, no ``_``, no other scripts' digits) that fit in int64; a rating is one of
the layout's values (whole stars 1..5, or half stars 0.5..5.0); a timestamp is a non-negative
integer; a (user, item) pair is rated once; every rated item is in the items file and (where the
users file is read) every user is in it; line endings are LF or CRLF throughout (a lone CR, a
mix of the two, NUL bytes and a byte-order mark are refused). Ids are kept as given: arrays are
indexed through ``np.unique``, never by id, so a large id costs no memory and a bad id cannot
index another item's row.

Reference: F. Maxwell Harper and Joseph A. Konstan, "The MovieLens Datasets: History and
Context", ACM Transactions on Interactive Intelligent Systems 5(4), 2015.
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rankwise.data.dataset import RankingDataset
from rankwise.data.recsys import Items, Ratings
from rankwise.errors import DataNotFoundError, InputError, ParseError

__all__ = ["load_movielens_100k", "load_movielens", "read_movielens_ratings", "read_movielens_items",
           "read_movielens_users", "MovieLens", "Users", "SPLITS", "LAYOUTS"]

SPLITS = ("u1", "u2", "u3", "u4", "u5", "ua", "ub")
LAYOUTS = ("100k", "1m", "latest")
_INT64_MAX = np.iinfo(np.int64).max
_DIGITS = re.compile(r"[0-9]+", re.ASCII)
_HALF_STARS = re.compile(r"[0-9](?:\.[0-9]+)?", re.ASCII)

# ---------------------------------------------------------------------------------------- files


def _read_text(path: Path, encoding: str, what: str) -> str:
    """The file's text with LF endings, after the checks every MovieLens file gets."""
    if not path.is_file():
        raise DataNotFoundError(f"{path}: missing; expected {what}")
    raw = path.read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):
        raise ParseError(path, 1, "starts with a UTF-8 byte-order mark; expected plain text as GroupLens ships it")
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise ParseError(path, raw.count(b"\n", 0, nul) + 1, "NUL byte in the file; expected text")
    n_crlf = raw.count(b"\r\n")
    n_cr = raw.count(b"\r")
    if n_cr != n_crlf:
        pos = re.search(rb"\r(?!\n)", raw).start()
        raise ParseError(path, raw.count(b"\n", 0, pos) + 1,
                         "carriage return without line feed (CR-only line ending); expected LF or CRLF line endings")
    if n_crlf:
        n_lf = raw.count(b"\n")
        if n_lf != n_crlf:
            pos = re.search(rb"(?<!\r)\n", raw).start()
            raise ParseError(path, raw.count(b"\n", 0, pos) + 1,
                             "mixed line endings (LF here, CRLF elsewhere); expected one kind throughout")
        raw = raw.replace(b"\r\n", b"\n")
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ParseError(path, line, f"not valid {encoding} text ({exc.reason}); expected {what}") from None


def _lines(text: str):
    """(line number, line) of the non-blank lines."""
    for k, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield k, line


def _parse_id(field: str, what: str, path: Path, k: int) -> int:
    if not _DIGITS.fullmatch(field):
        raise ParseError(path, k, f"{what} {field!r} is not a positive integer in ASCII digits; expected e.g. 42")
    value = int(field)
    if value > _INT64_MAX:
        raise ParseError(path, k, f"{what} {field} does not fit in int64 (max {_INT64_MAX})")
    if value < 1:
        raise ParseError(path, k, f"{what} {field} is not valid; MovieLens ids start at 1")
    return value


def _parse_timestamp(field: str, path: Path, k: int) -> int:
    if not _DIGITS.fullmatch(field):
        raise ParseError(path, k, f"timestamp {field!r} is not a non-negative integer (Unix seconds)")
    value = int(field)
    if value > _INT64_MAX:
        raise ParseError(path, k, f"timestamp {field} does not fit in int64")
    return value


def _parse_rating(field: str, layout: str, path: Path, k: int) -> float:
    if layout == "latest":
        ok = _HALF_STARS.fullmatch(field) is not None
        value = float(field) if ok else np.nan
        ok = ok and 1 <= value * 2 <= 10 and value * 2 == int(value * 2)
        if not ok:
            raise ParseError(path, k, f"rating {field!r} is not valid; expected 0.5..5.0 in half stars "
                                      "(0.5, 1.0, ..., 5.0) as in MovieLens 'latest'")
        return value
    if field not in ("1", "2", "3", "4", "5"):
        raise ParseError(path, k, f"rating {field!r} is not valid; expected a whole-star rating 1..5 "
                                  f"(MovieLens {layout})")
    return float(field)


# -------------------------------------------------------------------------------------- layouts


_RATING_FILES = {"u.data": "100k", "ratings.dat": "1m", "ratings.csv": "latest"}
_SPLIT_FILE = re.compile(r"u[1-5a-b]\.(base|test)|ua\.(base|test)|ub\.(base|test)")


def _layout_of_ratings(path: Path, layout: str | None) -> str:
    if layout is not None:
        if layout not in LAYOUTS:
            raise InputError(f"layout must be one of {LAYOUTS} or None (from the file name); got {layout!r}")
        return layout
    name = path.name
    if name in _RATING_FILES:
        return _RATING_FILES[name]
    if _SPLIT_FILE.fullmatch(name):
        return "100k"
    raise InputError(f"{path}: cannot tell the MovieLens layout from the file name; expected u.data (or "
                     "u1.base ...), ratings.dat or ratings.csv, or pass layout='100k', '1m' or 'latest'")


def read_movielens_ratings(path, *, layout: str | None = None) -> Ratings:
    """Read a MovieLens ratings file, checking every line against the layout's rules.

    Parameters
    ----------
    path : str or Path
        ``u.data`` / ``u1.base`` ... (100k), ``ratings.dat`` (1M) or ``ratings.csv`` ("latest").
    layout : {"100k", "1m", "latest"}, optional
        Default: from the file name.

    Returns
    -------
    Ratings
        One entry per line, in file order; ``line`` holds each rating's line number.

    Raises
    ------
    ParseError
        ``path:line``: a wrong field count, an id that is not a positive int64 in ASCII digits, a
        rating outside the layout's scale, a bad timestamp, a (user, item) pair rated twice
        (both lines named), or a malformed file (see the module docstring).
    """
    path = Path(path)
    layout = _layout_of_ratings(path, layout)
    encoding = "utf-8" if layout == "latest" else "latin-1"
    text = _read_text(path, encoding, f"a MovieLens {layout} ratings file")
    if layout == "100k":
        sep, expected = "\t", "'user<TAB>item<TAB>rating<TAB>timestamp'"
    elif layout == "1m":
        sep, expected = "::", "'UserID::MovieID::Rating::Timestamp'"
    else:
        sep, expected = ",", "'userId,movieId,rating,timestamp'"
    fast = _ratings_fast(text, layout, sep)
    if fast is not None:
        users, items, ratings, stamps, numbers = fast
        return Ratings(users, items, ratings, stamps, line=numbers, source=str(path))
    lines = _lines(text)
    if layout == "latest":
        first = next(lines, None)
        if first is None or first[1].strip() != "userId,movieId,rating,timestamp":
            raise ParseError(path, first[0] if first else 1,
                             f"header {first[1] if first else ''!r}; expected 'userId,movieId,rating,timestamp'")
    users, items, ratings, stamps, numbers = [], [], [], [], []
    for k, line in lines:
        f = line.split(sep)
        if len(f) != 4:
            raise ParseError(path, k, f"{len(f)} fields separated by {sep!r}; expected {expected}")
        users.append(_parse_id(f[0], "user id", path, k))
        items.append(_parse_id(f[1], "item id", path, k))
        ratings.append(_parse_rating(f[2], layout, path, k))
        stamps.append(_parse_timestamp(f[3], path, k))
        numbers.append(k)
    if not users:
        raise ParseError(path, None, f"no ratings; expected lines {expected}")
    return Ratings(np.asarray(users, dtype=np.int64), np.asarray(items, dtype=np.int64),
                   np.asarray(ratings, dtype=np.float64), np.asarray(stamps, dtype=np.int64),
                   line=np.asarray(numbers, dtype=np.int64), source=str(path))


_ID = r"[1-9][0-9]{0,14}"  # at most 15 digits: exact in float64 and int64; longer ones take the checked path
_FAST_LINE = {"100k": rf"{_ID}\t{_ID}\t[1-5]\t[0-9]{{1,15}}", "1m": rf"{_ID}::{_ID}::[1-5]::[0-9]{{1,15}}",
              "latest": rf"{_ID},{_ID},[0-5](?:\.[05]0*)?,[0-9]{{1,15}}"}


def _ratings_fast(text: str, layout: str, sep: str):
    """Whole-file parse for the common case: every line well formed, no blank line (else None).

    One regular expression checks the entire text, so numpy can convert the columns at once;
    anything unusual (blank lines, a bad field) returns None and the line-by-line reader, which
    names the line and the rule, takes over.
    """
    body = text
    first_line = 1
    if layout == "latest":
        head, _, body = text.partition("\n")
        if head != "userId,movieId,rating,timestamp":
            return None
        first_line = 2
    if not body.endswith("\n"):
        body += "\n"
    if body == "\n" or re.fullmatch(rf"(?:{_FAST_LINE[layout]}\n)+", body, re.ASCII) is None:
        return None
    if layout == "latest":  # half stars: pandas' C parser (the text is already checked line by line)
        import io

        import pandas as pd

        cols = pd.read_csv(io.StringIO(body), header=None, dtype=np.float64).to_numpy()
    else:
        flat = body.replace("\n", sep).replace(sep, ",") if sep != "," else body.replace("\n", ",")
        cols = np.fromstring(flat, dtype=np.int64, sep=",").reshape(-1, 4).astype(np.float64)
    ratings = cols[:, 2]
    if layout == "latest" and not np.all((ratings >= 0.5) & (ratings <= 5.0)):
        return None
    n = len(cols)
    return (cols[:, 0].astype(np.int64), cols[:, 1].astype(np.int64), ratings.copy(), cols[:, 3].astype(np.int64),
            np.arange(first_line, first_line + n, dtype=np.int64))


def _year_of(title: str) -> float:
    m = re.search(r"\((\d{4})(?:[-–]\d{0,4})?\)\s*$", title)
    return float(m.group(1)) if m else np.nan


def _items_100k(path: Path) -> Items:
    genre_path = path.parent / "u.genre"
    gtext = _read_text(genre_path, "latin-1", "u.genre of MovieLens 100k (genre|index lines)")
    genres = []
    for k, line in _lines(gtext):
        f = line.split("|")
        if len(f) != 2 or f[1] != str(len(genres)):
            raise ParseError(genre_path, k, f"{line!r}; expected 'name|{len(genres)}' (genres numbered from 0)")
        genres.append(f[0])
    text = _read_text(path, "latin-1", "u.item of MovieLens 100k")
    ids, titles, years, flags, numbers = [], [], [], [], []
    n = 5 + len(genres)
    for k, line in _lines(text):
        f = line.split("|")
        if len(f) != n:
            raise ParseError(path, k, f"{len(f)} '|'-separated fields; expected {n} "
                                      f"(id|title|release date|video date|url|{len(genres)} genre flags)")
        ids.append(_parse_id(f[0], "item id", path, k))
        titles.append(f[1])
        date = f[2].strip()
        if date and not re.fullmatch(r"\d{1,2}-[A-Z][a-z]{2}-\d{4}", date, re.ASCII):
            raise ParseError(path, k, f"release date {date!r}; expected d-Mon-yyyy (e.g. 01-Jan-1995) or empty")
        years.append(float(date[-4:]) if date else np.nan)
        bad = [g for g in f[5:] if g not in ("0", "1")]
        if bad:
            raise ParseError(path, k, f"genre flag {bad[0]!r}; expected 0 or 1")
        flags.append([g == "1" for g in f[5:]])
        numbers.append(k)
    return Items(np.asarray(ids, dtype=np.int64), np.asarray(flags, dtype=np.float32).reshape(len(ids), len(genres)),
                 genres, titles=titles, year=np.asarray(years), line=np.asarray(numbers), source=str(path))


def _genre_matrix(genre_lists):
    names = sorted({g for gl in genre_lists for g in gl})
    index = {g: j for j, g in enumerate(names)}
    G = np.zeros((len(genre_lists), len(names)), dtype=np.float32)
    for r, gl in enumerate(genre_lists):
        for g in gl:
            G[r, index[g]] = 1.0
    return G, names


def _genres_of(field: str, path: Path, k: int):
    if field == "(no genres listed)":
        return []
    gl = field.split("|")
    if any(not g.strip() for g in gl):
        raise ParseError(path, k, f"genres {field!r}; expected genre names separated by '|'")
    if len(set(gl)) != len(gl):
        raise ParseError(path, k, f"genres {field!r} name a genre twice")
    return gl


def _items_1m_or_latest(path: Path, layout: str) -> Items:
    ids, titles, genre_lists, numbers = [], [], [], []
    if layout == "1m":
        text = _read_text(path, "latin-1", "movies.dat of MovieLens 1M")
        for k, line in _lines(text):
            f = line.split("::")
            if len(f) != 3:
                raise ParseError(path, k, f"{len(f)} '::'-separated fields; expected 'MovieID::Title::Genres'")
            ids.append(_parse_id(f[0], "movie id", path, k))
            titles.append(f[1])
            genre_lists.append(_genres_of(f[2], path, k))
            numbers.append(k)
    else:
        text = _read_text(path, "utf-8", "movies.csv of MovieLens 'latest'")
        rows = csv.reader(text.split("\n"))
        try:
            header = next(rows, None)
            if header != ["movieId", "title", "genres"]:
                raise ParseError(path, 1, f"header {header!r}; expected 'movieId,title,genres'")
            for f in rows:
                k = rows.line_num
                if not f:
                    continue
                if len(f) != 3:
                    raise ParseError(path, k, f"{len(f)} CSV fields; expected 'movieId,title,genres' "
                                              "(titles with commas quoted)")
                ids.append(_parse_id(f[0], "movie id", path, k))
                titles.append(f[1])
                genre_lists.append(_genres_of(f[2], path, k))
                numbers.append(k)
        except csv.Error as exc:
            raise ParseError(path, rows.line_num, f"malformed CSV ({exc}); expected 'movieId,title,genres'") from None
    G, names = _genre_matrix(genre_lists)
    return Items(np.asarray(ids, dtype=np.int64), G, names, titles=titles,
                 year=np.asarray([_year_of(t) for t in titles], dtype=np.float64), line=np.asarray(numbers),
                 source=str(path))


def read_movielens_items(path, *, layout: str | None = None) -> Items:
    """Read a MovieLens items file: ``u.item`` (+ ``u.genre`` beside it), ``movies.dat`` or ``movies.csv``.

    Returns
    -------
    Items
        Item ids, the genre flags (one column per genre; 100k: the 19 of ``u.genre`` in their
        order; 1M/latest: the genre names found, sorted; ``(no genres listed)`` is no flag),
        titles and the year (100k: release date; 1M/latest: the ``(yyyy)`` ending the title;
        NaN where absent).

    Raises
    ------
    ParseError
        ``path:line`` for a wrong field count, a bad id, flag, date or genre list, or an item id
        listed twice.
    """
    path = Path(path)
    if layout is None:
        layout = {"u.item": "100k", "movies.dat": "1m", "movies.csv": "latest"}.get(path.name)
        if layout is None:
            raise InputError(f"{path}: cannot tell the MovieLens layout from the file name; expected u.item, "
                             "movies.dat or movies.csv, or pass layout='100k', '1m' or 'latest'")
    elif layout not in LAYOUTS:
        raise InputError(f"layout must be one of {LAYOUTS} or None; got {layout!r}")
    items = _items_100k(path) if layout == "100k" else _items_1m_or_latest(path, layout)
    if len(items.ids) == 0:
        raise ParseError(path, None, "no items")
    return items


@dataclass(frozen=True)
class Users:
    """Users of a MovieLens users file: ids, age, gender ("M"/"F"); ``line`` = line numbers."""

    ids: np.ndarray
    age: np.ndarray
    gender: np.ndarray
    line: np.ndarray
    source: str


def read_movielens_users(path, *, layout: str | None = None) -> Users:
    """Read ``u.user`` (``id|age|gender|occupation|zip``) or ``users.dat`` (``id::gender::age::occupation::zip``)."""
    path = Path(path)
    if layout is None:
        layout = {"u.user": "100k", "users.dat": "1m"}.get(path.name)
        if layout is None:
            raise InputError(f"{path}: cannot tell the MovieLens layout from the file name; expected u.user or "
                             "users.dat (the 'latest' layout has no users file)")
    if layout not in ("100k", "1m"):
        raise InputError(f"layout must be '100k' or '1m' for a users file; got {layout!r}")
    text = _read_text(path, "latin-1", f"a MovieLens {layout} users file")
    sep = "|" if layout == "100k" else "::"
    expected = "'id|age|gender|occupation|zip'" if layout == "100k" else "'UserID::Gender::Age::Occupation::Zip-code'"
    ids, ages, genders, numbers = [], [], [], []
    for k, line in _lines(text):
        f = line.split(sep)
        if len(f) != 5:
            raise ParseError(path, k, f"{len(f)} fields separated by {sep!r}; expected {expected}")
        age, gender = (f[1], f[2]) if layout == "100k" else (f[2], f[1])
        ids.append(_parse_id(f[0], "user id", path, k))
        if not _DIGITS.fullmatch(age) or not 0 < int(age) < 150:
            raise ParseError(path, k, f"age {age!r}; expected an integer 1..149")
        if gender not in ("M", "F"):
            raise ParseError(path, k, f"gender {gender!r}; expected 'M' or 'F'")
        ages.append(int(age))
        genders.append(gender)
        numbers.append(k)
    if not ids:
        raise ParseError(path, None, f"no users; expected lines {expected}")
    out = Users(np.asarray(ids, dtype=np.int64), np.asarray(ages, dtype=np.int64), np.asarray(genders),
                np.asarray(numbers), str(path))
    _check_unique(out.ids, out.line, path, "user id")
    return out


def _check_unique(ids, lines, path, what):
    order = np.argsort(ids, kind="stable")
    s = ids[order]
    dup = np.flatnonzero(s[1:] == s[:-1])
    if len(dup):
        a, b = sorted((int(lines[order[dup[0]]]), int(lines[order[dup[0] + 1]])))
        raise ParseError(path, b, f"{what} {int(s[dup[0]])} is listed again (first at line {a}); expected each once")


def check_ids_known(ratings: Ratings, known: np.ndarray, *, column: str, listed_in: str) -> None:
    """Every ``ratings.<column>`` id is in ``known``; else a ParseError at the first line that is not."""
    ids = getattr(ratings, column)
    missing = ~np.isin(ids, known)
    if missing.any():
        r = int(np.flatnonzero(missing)[0])
        line = int(ratings.line[r]) if ratings.line is not None else None
        what = "item" if column == "item" else "user"
        raise ParseError(ratings.source or "ratings", line,
                         f"{what} id {int(ids[r])} is not in {listed_in} ({int(missing.sum())} ratings name ids "
                         f"absent from it); expected every rated {what} to be listed there")


# ------------------------------------------------------------------------------------- folders


@dataclass(frozen=True)
class MovieLens:
    """A MovieLens release read and cross-checked: ratings, items, users (None for "latest")."""

    layout: str
    ratings: Ratings
    items: Items
    users: Users | None


_FOLDERS = {"100k": ("u.data", "u.item", "u.user"), "1m": ("ratings.dat", "movies.dat", "users.dat"),
            "latest": ("ratings.csv", "movies.csv", None)}


def load_movielens(path=None, *, ratings_file: str | None = None) -> MovieLens:
    """Read a MovieLens folder (100k, 1M or "latest", told apart by its files) and cross-check it.

    Parameters
    ----------
    path : str or Path, optional
        The folder (``ml-100k``, ``ml-1m``, ``ml-latest-small``, ...). Default:
        ``fetch("movielens-100k")``.
    ratings_file : str, optional
        Another ratings file of the folder with the same layout (e.g. ``"u1.base"``).

    Returns
    -------
    MovieLens
        ``ratings`` (every rated item checked to be in the items file and, for 100k/1M, every
        user in the users file), ``items``, ``users``.
    """
    if path is None:
        from rankwise.data.fetchers import fetch

        path = fetch("movielens-100k")
    path = Path(path)
    if not path.is_dir():
        raise DataNotFoundError(f"{path}: not a folder; expected a MovieLens folder holding u.data (100k), "
                                "ratings.dat (1M) or ratings.csv (latest)")
    layout = next((lay for lay, files in _FOLDERS.items() if (path / files[0]).is_file()), None)
    if layout is None:
        raise DataNotFoundError(f"{path}: no u.data (100k), ratings.dat (1M) or ratings.csv (latest) in this folder")
    rfile, ifile, ufile = _FOLDERS[layout]
    ratings = read_movielens_ratings(path / (ratings_file or rfile), layout=layout)
    items = read_movielens_items(path / ifile, layout=layout)
    check_ids_known(ratings, items.ids, column="item", listed_in=str(path / ifile))
    users = None
    if ufile is not None:
        users = read_movielens_users(path / ufile, layout=layout)
        check_ids_known(ratings, users.ids, column="user", listed_in=str(path / ufile))
    return MovieLens(layout, ratings, items, users)


# ------------------------------------------------------------------------ 100k official splits


def _check_disjoint(a: Ratings, b: Ratings) -> None:
    """No (user, item) pair is rated in both parts of a split; else a ParseError at the line in ``b``."""
    u = np.concatenate([a.user, b.user])
    i = np.concatenate([a.item, b.item])
    o = np.lexsort((i, u))
    same = np.flatnonzero((u[o][1:] == u[o][:-1]) & (i[o][1:] == i[o][:-1]))
    if len(same):
        rows = sorted((int(o[same[0]]), int(o[same[0] + 1])))
        ra, rb = rows[0], rows[1] - len(a)
        raise ParseError(b.source, int(b.line[rb]), f"user {int(b.user[rb])} rates item {int(b.item[rb])} here and "
                         f"in {a.source}:{int(a.line[ra])}; expected the two parts of a split to be disjoint")



def load_movielens_100k(path=None, split: str = "u1") -> tuple[RankingDataset, RankingDataset]:
    """MovieLens 100k as (train, test) ranking data sets, one query per user, on an official split.

    Features of a (user, item) row, all computed from the **training part only** (so the test part
    leaks nothing into its own features):

    - ``genre_<name>`` (19): the item's genre flags from ``u.item``;
    - ``release_year``: from the item's release date; where it is missing (item 267), the mean
      release year of the items rated in the training part;
    - ``item_mean_rating``, ``item_rating_count``: mean and number of the item's ratings in the
      training part (items unseen in training get the global training mean and count 0);
    - ``user_mean_rating``: mean of the user's ratings in the training part (global mean if none).

    Training rows' own ratings are part of those training statistics (the usual practice), so
    metrics on the training part are optimistic; the test part is clean. The official splits are
    random, not by time: for a time-based split with sampled negatives see
    :mod:`rankwise.data.recsys`.

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
        23 features, named in ``feature_names``.
    """
    if split not in SPLITS:
        raise InputError(f"split must be one of {SPLITS}; got {split!r}")
    if path is None:
        from rankwise.data.fetchers import fetch

        path = fetch("movielens-100k")
    path = Path(path)
    train = read_movielens_ratings(path / f"{split}.base", layout="100k")
    test = read_movielens_ratings(path / f"{split}.test", layout="100k")
    items = read_movielens_items(path / "u.item", layout="100k")
    for part in (train, test):
        check_ids_known(part, items.ids, column="item", listed_in=str(path / "u.item"))
    if (path / "u.user").is_file():
        users = read_movielens_users(path / "u.user", layout="100k")
        for part in (train, test):
            check_ids_known(part, users.ids, column="user", listed_in=str(path / "u.user"))
    _check_disjoint(train, test)

    # everything indexed through the items file's row, never by id
    row_of = items.row_of  # item id -> row of items
    years = items.year.copy()
    rated = np.unique(row_of(train.item))
    years[np.isnan(years)] = np.nanmean(years[rated])  # mean year of the items rated in training
    tr_rows = row_of(train.item)
    r = train.rating
    gmean = float(r.mean())
    n_items = len(items.ids)
    icount = np.bincount(tr_rows, minlength=n_items).astype(np.float64)
    isum = np.bincount(tr_rows, weights=r, minlength=n_items)
    imean = np.where(icount > 0, isum / np.maximum(icount, 1), gmean)
    user_ids, tr_users = np.unique(train.user, return_inverse=True)
    umean_known = np.bincount(tr_users, weights=r) / np.bincount(tr_users)

    names = [f"genre_{g}" for g in items.genres] + ["release_year", "item_mean_rating", "item_rating_count",
                                                   "user_mean_rating"]

    def build(part: Ratings):
        o = np.lexsort((part.item, part.user))
        u, it = part.user[o], part.item[o]
        rows = row_of(it)
        pos = np.clip(np.searchsorted(user_ids, u), 0, len(user_ids) - 1)
        um = np.where(user_ids[pos] == u, umean_known[pos], gmean)
        X = np.column_stack([items.genre_flags[rows], years[rows], imean[rows], icount[rows], um]).astype(np.float32)
        return RankingDataset.from_arrays(X, part.rating[o], u, doc_ids=it.astype(str), feature_names=names,
                                          allow_nan=False)

    return build(train), build(test)
