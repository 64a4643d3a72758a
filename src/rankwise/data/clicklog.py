"""Click logs as flat arrays: :class:`ClickLog`, the Yandex reader and the generic long table.

A click log is a sequence of *sessions* (result pages): one query, a ranked list of documents
(rank 1 first) and, per document, whether it was clicked. ``ClickLog`` keeps it as flat arrays
(CSR-like, ``session_offsets``), so millions of sessions fit in memory and the click-model
kernels run over them without Python objects:

- ``session_offsets`` (int64, ``n_sessions + 1``): the items of session ``s`` are rows
  ``session_offsets[s]:session_offsets[s+1]``, in rank order;
- ``query`` (int64 per session): a code into ``queries`` (the original query ids);
- ``doc`` (int64 per row): a code into ``docs``; ``pair`` (int64 per row): a code of the
  (query, doc) pair into ``pair_query`` / ``pair_doc``;
- ``clicked`` (uint8 per row); ``click_time`` (float64 per row, NaN where unknown or not
  clicked), optional;
- ``session_data``: optional per-session arrays (e.g. the intervention a session received);
- ``row_data``: optional per-row arrays (e.g. the policy-aware propensity of every displayed document
  of a stochastically logged session, ``row_data["exposure"]``).

Ranks are positions in the session, 1-based (``ranks``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rankwise.errors import InputError, ParseError

__all__ = ["ClickLog", "ClickCounts", "read_click_log", "CLICK_LOG_FORMATS"]

CLICK_LOG_FORMATS = ("yandex_sample", "csv", "parquet")
#: the rules of :meth:`ClickLog.pair_labels`
PAIR_LABEL_RULES = ("any", "last", "majority", "ctr")


def _codes(values):
    """``(codes, vocabulary)`` in order of first appearance."""
    import pandas as pd

    codes, uniques = pd.factorize(np.asarray(values), sort=False)
    return codes.astype(np.int64), np.asarray(uniques)


class _PairCodes:
    """What both log forms know of their codes: queries, documents and (query, doc) pairs
    (``queries``, ``docs``: the original ids; ``pair_query``, ``pair_doc``: each pair's codes)."""

    @property
    def n_queries(self) -> int:
        return len(self.queries)

    @property
    def n_pairs(self) -> int:
        return len(self.pair_query)

    def pair_keys(self):
        """Original ``(query id, doc id)`` of every pair code."""
        return self.queries[self.pair_query], self.docs[self.pair_doc]


@dataclass
class ClickLog(_PairCodes):
    """Sessions of ranked documents with clicks, stored as flat arrays (see the module docstring).

    Build one with :func:`read_click_log`, :meth:`from_frame` or :meth:`from_arrays`.
    """

    session_offsets: np.ndarray
    query: np.ndarray
    queries: np.ndarray
    doc: np.ndarray
    docs: np.ndarray
    clicked: np.ndarray
    click_time: np.ndarray | None = None
    session_data: dict = field(default_factory=dict)
    row_data: dict = field(default_factory=dict)

    def __post_init__(self):
        off = np.asarray(self.session_offsets, dtype=np.int64)
        self.session_offsets = off
        self.query = np.asarray(self.query, dtype=np.int64)
        self.doc = np.asarray(self.doc, dtype=np.int64)
        self.clicked = np.asarray(self.clicked, dtype=np.uint8)
        n_items = len(self.doc)
        if off.ndim != 1 or len(off) < 1 or off[0] != 0 or off[-1] != n_items or np.any(np.diff(off) < 1):
            raise InputError("session_offsets must start at 0, end at the number of rows "
                             f"({n_items}) and grow by at least 1 per session (every session shows a document)")
        if len(self.query) != len(off) - 1:
            raise InputError(f"query has {len(self.query)} entries but there are {len(off) - 1} sessions")
        if len(self.clicked) != n_items:
            raise InputError(f"clicked has {len(self.clicked)} entries but there are {n_items} rows")
        if np.any(self.clicked > 1):
            raise InputError("clicked must be 0/1")
        if self.click_time is not None:
            self.click_time = np.asarray(self.click_time, dtype=np.float64)
            if len(self.click_time) != n_items:
                raise InputError(f"click_time has {len(self.click_time)} entries but there are {n_items} rows")
        for k, v in self.session_data.items():
            if len(v) != len(off) - 1:
                raise InputError(f"session_data[{k!r}] has {len(v)} entries but there are {len(off) - 1} sessions")
        if not isinstance(self.row_data, dict):
            raise InputError(f"row_data must be a dict of per-row arrays; got {type(self.row_data).__name__}")
        for k, v in self.row_data.items():
            if np.ndim(v) != 1 or len(v) != n_items:
                raise InputError(f"row_data[{k!r}] must have one entry per row ({n_items}); got shape {np.shape(v)}")
        self.row_data = {k: np.asarray(v) for k, v in self.row_data.items()}
        # (query, doc) pair codes
        qrow = np.repeat(self.query, np.diff(off))
        key = qrow * (int(self.doc.max(initial=0)) + 1) + self.doc
        codes, uniq = _codes(key)
        self.pair = codes
        first = np.zeros(len(uniq), dtype=np.int64)
        first[codes[::-1]] = np.arange(n_items - 1, -1, -1)
        self.pair_query = qrow[first]
        self.pair_doc = self.doc[first]

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_arrays(cls, query, docs, clicked, *, click_time=None, session_data=None, row_data=None) -> "ClickLog":
        """From per-session lists: ``query[s]``, ``docs[s]`` (ranked ids), ``clicked[s]`` (0/1 per doc);
        ``row_data``: name -> per-session lists like ``clicked`` (one value per shown document)."""
        if not (len(query) == len(docs) == len(clicked)):
            raise InputError(f"query, docs and clicked must have one entry per session; got lengths "
                             f"{len(query)}, {len(docs)}, {len(clicked)}")
        sizes = np.array([len(d) for d in docs], dtype=np.int64)
        for s, (d, c) in enumerate(zip(docs, clicked)):
            if len(d) != len(c):
                raise InputError(f"session {s}: {len(d)} documents but {len(c)} click flags")
        off = np.concatenate([[0], np.cumsum(sizes)])
        qc, qv = _codes(query)
        flat_docs = np.concatenate([np.asarray(d) for d in docs]) if len(docs) else np.zeros(0, np.int64)
        dc, dv = _codes(flat_docs)
        flat_c = np.concatenate([np.asarray(c, dtype=np.int64) for c in clicked]) if len(docs) else np.zeros(0)
        if np.any((flat_c != 0) & (flat_c != 1)):
            raise InputError("clicked must hold 0/1 flags")
        ct = None if click_time is None else np.concatenate([np.asarray(t, float) for t in click_time])
        rd = {}
        for k, v in (row_data or {}).items():
            if len(v) != len(docs) or any(len(a) != n for a, n in zip(v, sizes)):
                raise InputError(f"row_data[{k!r}] must hold one list per session, as long as its documents")
            rd[k] = np.concatenate([np.asarray(a) for a in v]) if len(docs) else np.zeros(0)
        return cls(off, qc, qv, dc, dv, flat_c.astype(np.uint8), ct, dict(session_data or {}), rd)

    @classmethod
    def from_frame(cls, frame, *, session="session", query="query", rank="rank", doc="doc",
                   clicked="clicked", time=None, row_data=(), source="frame") -> "ClickLog":
        """From a long table, one row per shown document: ``(session, query, rank, doc, clicked[, time])``.

        Rows may come in any order; within a session ranks must be exactly 1..n and the query
        the same on every row. Sessions keep the order of their first row. ``row_data``: names of
        further columns kept as per-row arrays (:attr:`row_data`, e.g. ``("exposure",)``; what
        :meth:`to_frame` writes).
        """
        import pandas as pd

        if not isinstance(frame, pd.DataFrame):
            raise InputError(f"frame must be a pandas DataFrame; got {type(frame).__name__}")
        if isinstance(row_data, str):
            row_data = (row_data,)
        row_data = tuple(row_data)
        clash = [c for c in row_data if c in (session, query, rank, doc, clicked, time)]
        if clash:
            raise InputError(f"{source}: row_data columns {clash} are already the log's own columns")
        cols = [session, query, rank, doc, clicked] + ([time] if time else []) + list(row_data)
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise InputError(f"{source}: columns {missing} are missing; it has {list(frame.columns)}. "
                             "Name them with session=, query=, rank=, doc=, clicked=, time=")
        if len(frame) == 0:
            raise InputError(f"{source}: the table has no rows")
        for c in (session, query, rank, doc, clicked):
            if frame[c].isna().any():
                bad = int(np.flatnonzero(frame[c].isna().to_numpy())[0])
                raise InputError(f"{source}: column {c!r} is missing on row {bad}")
        sc, _ = _codes(frame[session].to_numpy())
        try:
            r = frame[rank].to_numpy().astype(np.int64)
        except (TypeError, ValueError):
            raise InputError(f"{source}: column {rank!r} must hold integer ranks (1 = top)") from None
        c = frame[clicked].to_numpy()
        if c.dtype == bool:
            c = c.astype(np.int64)
        try:
            c = c.astype(np.float64)
        except (TypeError, ValueError):
            raise InputError(f"{source}: column {clicked!r} must hold 0/1 or booleans") from None
        if np.any((c != 0) & (c != 1)):
            bad = int(np.flatnonzero((c != 0) & (c != 1))[0])
            raise InputError(f"{source}: column {clicked!r} must hold 0/1 or booleans; row {bad} has {c[bad]!r}")
        order = np.lexsort((r, sc))
        sc_s, r_s = sc[order], r[order]
        bounds = np.flatnonzero(np.diff(sc_s)) + 1
        off = np.concatenate([[0], bounds, [len(sc_s)]]).astype(np.int64)
        expected = np.arange(len(sc_s)) - np.repeat(off[:-1], np.diff(off)) + 1
        if np.any(r_s != expected):
            i = int(np.flatnonzero(r_s != expected)[0])
            sess = frame[session].to_numpy()[order[i]]
            k = int(np.searchsorted(off, i, "right") - 1)
            raise InputError(f"{source}: session {sess!r} has ranks {r_s[off[k]:off[k + 1]].tolist()}; "
                             "expected exactly 1..n (one row per shown document)")
        q_all = frame[query].to_numpy()[order]
        q_first = q_all[off[:-1]]
        if np.any(q_all != np.repeat(q_first, np.diff(off))):
            i = int(np.flatnonzero(q_all != np.repeat(q_first, np.diff(off)))[0])
            sess = frame[session].to_numpy()[order[i]]
            raise InputError(f"{source}: session {sess!r} has more than one query ({q_first[np.searchsorted(off, i, 'right') - 1]!r} "
                             f"and {q_all[i]!r}); a session is one result page of one query")
        qc, qv = _codes(q_first)
        dc, dv = _codes(frame[doc].to_numpy()[order])
        ct = None if time is None else frame[time].to_numpy().astype(np.float64)[order]
        rd = {k: frame[k].to_numpy()[order] for k in row_data}
        return cls(off, qc, qv, dc, dv, c[order].astype(np.uint8), ct, row_data=rd)

    # -- views ----------------------------------------------------------------------------------
    @property
    def n_sessions(self) -> int:
        return len(self.session_offsets) - 1

    def __len__(self) -> int:
        return self.n_sessions

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.session_offsets)

    @property
    def max_rank(self) -> int:
        return int(self.sizes.max(initial=0))

    @property
    def ranks(self) -> np.ndarray:
        """1-based rank of every row."""
        off = self.session_offsets
        return np.arange(len(self.doc), dtype=np.int64) - np.repeat(off[:-1], np.diff(off)) + 1

    @property
    def query_of_row(self) -> np.ndarray:
        return np.repeat(self.query, self.sizes)

    def subset(self, sessions) -> "ClickLog":
        """The log restricted to the given session indices (or a boolean mask), in that order."""
        sessions = np.asarray(sessions)
        if sessions.dtype == bool:
            if len(sessions) != self.n_sessions:
                raise InputError(f"boolean session mask has {len(sessions)} entries, the log {self.n_sessions}")
            sessions = np.flatnonzero(sessions)
        sessions = sessions.astype(np.int64)
        if len(sessions) and (sessions.min() < 0 or sessions.max() >= self.n_sessions):
            raise InputError(f"session indices must lie in [0, {self.n_sessions}); got {sessions.min()}..{sessions.max()}")
        sizes = self.sizes[sessions]
        off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        rows = np.repeat(self.session_offsets[sessions], sizes) + (np.arange(off[-1]) - np.repeat(off[:-1], sizes))
        qc, qv = _codes(self.queries[self.query[sessions]])
        dc, dv = _codes(self.docs[self.doc[rows]])
        ct = None if self.click_time is None else self.click_time[rows]
        sd = {k: np.asarray(v)[sessions] for k, v in self.session_data.items()}
        rd = {k: v[rows] for k, v in self.row_data.items()}
        return ClickLog(off, qc, qv, dc, dv, self.clicked[rows], ct, sd, rd)

    def split(self, train_fraction: float = 0.75, *, shuffle: bool = False, random_state=None):
        """``(train, test)``: the first ``train_fraction`` of the sessions (the book's protocol keeps
        the log order; ``shuffle=True`` draws them at random)."""
        if not 0 < float(train_fraction) < 1:
            raise InputError(f"train_fraction must be in (0, 1); got {train_fraction}")
        idx = np.arange(self.n_sessions)
        if shuffle:
            idx = np.random.default_rng(random_state).permutation(idx)
        cut = int(round(train_fraction * self.n_sessions))
        return self.subset(np.sort(idx[:cut]) if shuffle else idx[:cut]), self.subset(np.sort(idx[cut:]) if shuffle else idx[cut:])

    # -- aggregation ----------------------------------------------------------------------------
    def ctr_by_rank(self) -> np.ndarray:
        """Click-through rate at each rank 1..max_rank (over sessions that show that rank)."""
        r = self.ranks - 1
        n = np.bincount(r, minlength=self.max_rank)
        c = np.bincount(r, weights=self.clicked, minlength=self.max_rank)
        return np.divide(c, n, out=np.zeros(len(n)), where=n > 0)

    def query_table(self):
        """One row per query: ``query, sessions, clicks, ctr, sessions_with_click``."""
        import pandas as pd

        nq = self.n_queries
        sess_clicks = np.add.reduceat(self.clicked.astype(np.int64), self.session_offsets[:-1]) if self.n_sessions else np.zeros(0)
        n = np.bincount(self.query, minlength=nq)
        clicks = np.bincount(self.query, weights=sess_clicks, minlength=nq)
        items = np.bincount(self.query, weights=self.sizes, minlength=nq)
        with_click = np.bincount(self.query, weights=(sess_clicks > 0), minlength=nq)
        return pd.DataFrame({"query": self.queries, "sessions": n, "clicks": clicks.astype(np.int64),
                             "ctr": clicks / np.maximum(items, 1), "sessions_with_click": with_click.astype(np.int64)})

    def pair_table(self):
        """One row per (query, doc): ``query, doc, impressions, clicks, ctr, mean_rank``."""
        import pandas as pd

        npairs = self.n_pairs
        imp = np.bincount(self.pair, minlength=npairs)
        clk = np.bincount(self.pair, weights=self.clicked, minlength=npairs)
        rk = np.bincount(self.pair, weights=self.ranks, minlength=npairs)
        q, d = self.pair_keys()
        return pd.DataFrame({"query": q, "doc": d, "impressions": imp, "clicks": clk.astype(np.int64),
                             "ctr": clk / np.maximum(imp, 1), "mean_rank": rk / np.maximum(imp, 1)})

    def to_frame(self):
        """The long table ``session, query, rank, doc, clicked[, time]``, then one column per :attr:`row_data`
        array (read back with ``from_frame(..., row_data=names)``)."""
        import pandas as pd

        cols = {"session": np.repeat(np.arange(self.n_sessions), self.sizes),
                "query": self.queries[self.query_of_row], "rank": self.ranks,
                "doc": self.docs[self.doc], "clicked": self.clicked.astype(np.int64)}
        if self.click_time is not None:
            cols["time"] = self.click_time
        for k, v in self.row_data.items():
            if k in cols:
                raise InputError(f"row_data[{k!r}] has the name of one of the log's own columns")
            cols[k] = v
        return pd.DataFrame(cols)

    def __repr__(self) -> str:
        return (f"ClickLog({self.n_sessions} sessions, {self.n_queries} queries, {self.n_pairs} (query, doc) "
                f"pairs, {int(self.clicked.sum())} clicked rows, max rank {self.max_rank})")

    def pair_labels(self, rule: str = "any", *, order=None) -> np.ndarray:
        """One binary (or rate) label per (query, doc) pair code, aggregated over the sessions that show it.

        - ``rule="any"``: 1 if the pair was clicked in any session, else 0;
        - ``rule="last"``: its click in the last session that shows it — in log order, or in the order of
          ``order`` (one sort key per session, e.g. a time stamp; ties keep log order);
        - ``rule="majority"``: 1 if it was clicked in strictly more than half of the sessions showing it;
        - ``rule="ctr"``: its click-through rate (clicks / impressions).

        This is the one aggregation of clicks into labels; :func:`rankwise.data.from_events` is the case
        of one-document sessions (an event log).
        """
        if rule not in PAIR_LABEL_RULES:
            raise InputError(f"rule must be one of {PAIR_LABEL_RULES}; got {rule!r}")
        n = self.n_pairs
        clk = np.bincount(self.pair, weights=self.clicked, minlength=n)
        if rule == "any":
            return (clk > 0).astype(np.float64)
        imp = np.bincount(self.pair, minlength=n)
        if rule == "ctr":
            return clk / np.maximum(imp, 1)
        if rule == "majority":
            return (2 * clk > imp).astype(np.float64)
        session_of_row = np.repeat(np.arange(self.n_sessions), self.sizes)
        if order is None:
            rank_of_session = np.arange(self.n_sessions)
        else:
            order = np.asarray(order)
            if order.shape != (self.n_sessions,):
                raise InputError(f"order must have one sort key per session ({self.n_sessions}); got shape {order.shape}")
            rank_of_session = np.empty(self.n_sessions, dtype=np.int64)
            rank_of_session[np.argsort(order, kind="stable")] = np.arange(self.n_sessions)
        # the row of each pair in its latest session: rows sorted by (session position, row), last write wins
        rows = np.lexsort((np.arange(len(self.pair)), rank_of_session[session_of_row]))
        out = np.zeros(n)
        out[self.pair[rows]] = self.clicked[rows]
        return out

    def counts(self, by=()) -> "ClickCounts":
        """The log aggregated: one row per (query, doc, rank) with its clicks and impressions, and the
        number of sessions of every query (:class:`ClickCounts`).

        ``by``: names of :attr:`session_data` entries (a name or a sequence) that split the rows further, one
        row per (query, doc, rank, their values), kept as :attr:`ClickCounts.row_data` — e.g. ``by="pair_rank"``,
        the intervention of a RandPair experiment, which is all that :class:`~rankwise.clicks.RandPair` needs
        of the sessions."""
        by = (by,) if isinstance(by, str) else tuple(by)
        missing = [k for k in by if k not in self.session_data]
        if missing:
            raise InputError(f"counts(by=...): session_data has no {missing}; it has {sorted(self.session_data)}")
        R = max(self.max_rank, 1)
        key = self.pair * R + (self.ranks - 1)
        values = []
        for k in by:  # each split value coded 0..m-1 and folded into the key
            v_u, v_code = np.unique(np.asarray(self.session_data[k]), return_inverse=True)
            if int(key.max(initial=0) + 1) * len(v_u) >= 2 ** 62:
                raise InputError(f"counts(by={by!r}): too many (query, doc, rank, value) combinations")
            key = key * len(v_u) + np.repeat(v_code.reshape(-1), self.sizes)
            values.append(v_u)
        uniq, inv = np.unique(key, return_inverse=True)
        row_data, rest = {}, uniq
        for k, v_u in zip(by[::-1], values[::-1]):
            row_data[k] = v_u[rest % len(v_u)]
            rest = rest // len(v_u)
        pair = rest // R
        return ClickCounts(self.queries, np.bincount(self.query, minlength=self.n_queries), self.pair_query[pair],
                           self.docs, self.pair_doc[pair], rest % R + 1,
                           np.bincount(inv, weights=self.clicked), np.bincount(inv).astype(np.float64),
                           row_data={k: row_data[k] for k in by})


@dataclass
class ClickCounts(_PairCodes):
    r"""An aggregated click log: one row per (query, doc, rank) with its clicks and impressions, and
    the number of sessions of every query.

    What IPS labels and regression-EM need from a log under the position-based model (the clicks
    of a (query, doc) at a rank are a sum of independent Bernoulli draws), in memory proportional
    to the (query, doc, rank) triples instead of the sessions: :meth:`ClickLog.counts` aggregates
    a session log, and :func:`~rankwise.clicks.simulate_clicks_protocol` with ``aggregate=True``
    draws one directly, so 10⁸ simulated sessions cost what 10⁴ rows do.

    Fields: ``queries`` (query ids, by code), ``sessions`` (sessions of each query code, ≥ 1),
    and per row ``query`` (code), ``doc`` (a code into ``docs``), ``rank`` (1-based), ``clicks``,
    ``impressions`` (0 ≤ clicks ≤ impressions; a document shows at most once per session, so its
    impressions over all ranks are at most its query's sessions). ``pair`` (per row),
    ``pair_query`` and ``pair_doc`` code the (query, doc) pairs as :class:`ClickLog` does.
    ``row_data`` (optional): per-row arrays that split a (query, doc, rank) further by a session property,
    e.g. ``row_data["pair_rank"]``, the intervention of the sessions counted in the row
    (:meth:`ClickLog.counts` with ``by=``); rows are then unique per (query, doc, rank, those values).
    """

    queries: np.ndarray
    sessions: np.ndarray
    query: np.ndarray
    docs: np.ndarray
    doc: np.ndarray
    rank: np.ndarray
    clicks: np.ndarray
    impressions: np.ndarray
    row_data: dict = field(default_factory=dict)

    def __post_init__(self):
        self.queries = np.asarray(self.queries)
        self.docs = np.asarray(self.docs)
        self.sessions = np.asarray(self.sessions, dtype=np.int64)
        self.query = np.asarray(self.query, dtype=np.int64)
        self.doc = np.asarray(self.doc, dtype=np.int64)
        self.rank = np.asarray(self.rank, dtype=np.int64)
        self.clicks = np.asarray(self.clicks, dtype=np.float64)
        self.impressions = np.asarray(self.impressions, dtype=np.float64)
        n = len(self.query)
        for name in ("doc", "rank", "clicks", "impressions"):
            if len(getattr(self, name)) != n:
                raise InputError(f"ClickCounts: {name} has {len(getattr(self, name))} entries, query {n}")
        if len(self.sessions) != len(self.queries):
            raise InputError(f"ClickCounts: sessions has {len(self.sessions)} entries for {len(self.queries)} queries")
        if not isinstance(self.row_data, dict):
            raise InputError("ClickCounts: row_data must be a dict of per-row arrays; got "
                             f"{type(self.row_data).__name__}")
        for k, v in self.row_data.items():
            if np.ndim(v) != 1 or len(v) != n:
                raise InputError(f"ClickCounts: row_data[{k!r}] must have one entry per row ({n}); got shape "
                                 f"{np.shape(v)}")
        self.row_data = {k: np.asarray(v) for k, v in self.row_data.items()}
        if np.any(self.sessions < 1):
            raise InputError("ClickCounts: every query needs at least one session")
        if n and (self.query.min() < 0 or self.query.max() >= len(self.queries)
                  or self.doc.min() < 0 or self.doc.max() >= len(self.docs)):
            raise InputError("ClickCounts: query and doc must be codes into queries and docs")
        if n and self.rank.min() < 1:
            raise InputError(f"ClickCounts: ranks are 1-based; got {self.rank.min()}")
        bad = ~((self.clicks >= 0) & (self.clicks <= self.impressions) & (self.impressions >= 1))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"ClickCounts: row {i} has {self.clicks[i]:g} clicks of {self.impressions[i]:g} "
                             "impressions; need 0 <= clicks <= impressions and impressions >= 1")
        key = self.query * (int(self.doc.max(initial=0)) + 1) + self.doc
        codes, uniq = _codes(key)
        self.pair = codes
        first = np.zeros(len(uniq), dtype=np.int64)
        first[codes[::-1]] = np.arange(n - 1, -1, -1)
        self.pair_query = self.query[first]
        self.pair_doc = self.doc[first]
        shown = np.bincount(codes, weights=self.impressions, minlength=len(uniq))
        over = shown > self.sessions[self.pair_query]
        if over.any():
            i = int(np.flatnonzero(over)[0])
            raise InputError(f"ClickCounts: (query {self.queries[self.pair_query[i]]!r}, doc {self.docs[self.pair_doc[i]]!r}) "
                             f"has {shown[i]:g} impressions but its query {self.sessions[self.pair_query[i]]} sessions "
                             "(a document shows at most once per session)")

    @property
    def n_sessions(self) -> int:
        return int(self.sessions.sum())

    @property
    def max_rank(self) -> int:
        return int(self.rank.max(initial=0))

    def __repr__(self) -> str:
        return (f"ClickCounts({self.n_sessions} sessions, {self.n_queries} queries, {self.n_pairs} (query, doc) "
                f"pairs, {len(self.rank)} (query, doc, rank) rows, {int(self.clicks.sum())} clicks)")


# ------------------------------------------------------------------------------------- readers
def _read_yandex_sample(path: Path) -> ClickLog:
    """The compact layout of the Yandex Relevance Prediction Challenge sample used by PyClick.

    Records separated by ``;``: ``<query>\\t<doc>,<doc>,... : <clicked doc>, <clicked doc>, ...``.
    A click on a document that is not on the page is ignored (as PyClick does); repeated clicks
    on a document count once; click order is not kept (the sample has no time stamps). The raw
    number of click events of each session (repeats and off-page clicks included) is kept in
    ``session_data["click_events"]``.
    """
    text = path.read_text(encoding="utf-8")
    queries, doc_lists, click_lists, events = [], [], [], []
    line = 1
    for rec in text.split(";"):
        rec_line = line + rec[: len(rec) - len(rec.lstrip())].count("\n")
        line += rec.count("\n")
        body = rec.strip()
        if not body:
            continue
        head, sep, tail = body.partition(":")
        if not sep:
            raise ParseError(path, rec_line, f"record {body[:60]!r} has no ' : ' between the documents and the "
                             "clicks (expected '<query>\\t<doc>,<doc>,... : <clicked>, ...')")
        qpart, tab, dpart = head.strip().partition("\t")
        if not tab:
            qpart, _, dpart = head.strip().partition(" ")
        docs = [d.strip() for d in dpart.split(",") if d.strip()]
        if not qpart.strip() or not docs:
            raise ParseError(path, rec_line, f"record {body[:60]!r}: expected a query id, a tab and the ranked documents")
        click_ids = [c.strip() for c in tail.split(",") if c.strip()]
        clicks = set(click_ids)
        events.append(len(click_ids))
        queries.append(qpart.strip())
        doc_lists.append(docs)
        click_lists.append([1 if d in clicks else 0 for d in docs])
    if not queries:
        raise ParseError(path, None, "no session found (records are separated by ';')")
    return ClickLog.from_arrays(queries, doc_lists, click_lists,
                                session_data={"click_events": np.asarray(events, dtype=np.int64)})


def read_click_log(path, format: str = "yandex_sample", **columns) -> ClickLog:
    """Read a click log.

    Parameters
    ----------
    path : str or Path
        The file.
    format : {"yandex_sample", "csv", "parquet"}
        ``"yandex_sample"``: the layout of ``$RANKWISE_DATA/yandex_clicks/sessions.txt`` (the
        Yandex Relevance Prediction Challenge sample as PyClick distributes it: 10 documents per
        page, clicks as a list of clicked documents). ``"csv"`` / ``"parquet"``: a long table
        with one row per shown document, columns ``session, query, rank, doc, clicked[, time]``
        (other names through ``session=``, ``query=``, ... keyword arguments, as
        :meth:`ClickLog.from_frame` takes them).

    Returns
    -------
    ClickLog
    """
    path = Path(path)
    if format not in CLICK_LOG_FORMATS:
        raise InputError(f"format must be one of {CLICK_LOG_FORMATS}; got {format!r}")
    if not path.is_file():
        raise InputError(f"click log {path} does not exist")
    if format == "yandex_sample":
        if columns:
            raise InputError(f"format 'yandex_sample' takes no column names; got {sorted(columns)}")
        return _read_yandex_sample(path)
    import pandas as pd

    try:
        frame = pd.read_csv(path) if format == "csv" else pd.read_parquet(path)
    except Exception as exc:  # pandas/pyarrow raise many kinds for a bad file
        raise ParseError(path, None, f"cannot read as {format}: {type(exc).__name__}: {exc}") from None
    return ClickLog.from_frame(frame, source=str(path), **columns)
