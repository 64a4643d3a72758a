r"""Interleaved comparison of two rankers from clicks: team-draft and probabilistic interleaving.

Each impression (session) of a query shows one list interleaved from ranker A's and ranker B's
rankings; the user's clicks on it are credited to A or B, and the impression's *outcome* is
+1 (A wins), -1 (B wins) or 0 (tie). :func:`interleave` builds the pages (a :class:`~rankwise.data.
ClickLog` without clicks, for a click model's ``sample`` or for real users);
:meth:`Interleaving.credit` turns clicks on them into outcomes and an overall preference.

Team-draft interleaving (Radlinski, Kurup & Joachims, CIKM 2008, Algorithm 2): in every round the
team with fewer picks — or, when both have as many, the winner of a fair coin — adds its
highest-ranked document not yet in the list; clicks count for the team that picked the document; A
wins an impression when its team gets more clicks. Stops at ``k`` documents or when either ranking
has no document left that is not in the list.

Probabilistic interleaving (Hofmann, Whiteson & de Rijke, CIKM 2011): each ranker x is a softmax
over its ranking, :math:`P_x(d) \propto r_x(d)^{-\tau}` over the documents not yet placed
(:math:`r_x(d)` the rank of d in x's full list); every position draws a ranker by a fair coin and a
document from its softmax, which is then removed from both. The credit marginalises over the
assignments a ∈ {A, B}^k that could have produced the observed list L:

.. math:: E[o \mid L, c] = \sum_a o(a, c)\, P(a \mid L), \qquad
          P(a \mid L) \propto 2^{-k} \prod_{i=1}^{k} P_{a_i}(L_i \mid L_{<i}),

with :math:`o(a, c) = \operatorname{sign}(\#\{\text{clicks assigned to } A\} -
\#\{\text{clicks assigned to } B\})`. The product factorises over positions (the remaining set at
position i depends on L only), so the posterior assignments are independent with
:math:`P(a_i = A \mid L) = P_A(L_i \mid L_{<i}) / (P_A(L_i \mid L_{<i}) + P_B(L_i \mid L_{<i}))`, and the
expected outcome is computed exactly from the distribution of the click difference (a convolution
over the clicked positions) rather than over all :math:`2^k` assignments.

Preference. Outcomes are averaged per query; a query is a win for A when its mean outcome is > 0,
a loss when < 0, a tie otherwise. The preference is tested by the two-sided sign test (exact
binomial test of wins against losses, ties left out); ``delta`` is
:math:`(\mathrm{wins} + \mathrm{ties}/2)/n - 1/2` (Chapelle, Joachims, Radlinski & Yue, TOIS 2012).

References
----------
F. Radlinski, M. Kurup, T. Joachims. "How does clickthrough data reflect retrieval quality?" CIKM 2008.
K. Hofmann, S. Whiteson, M. de Rijke. "A probabilistic method for inferring preferences from clicks."
CIKM 2011.
O. Chapelle, T. Joachims, F. Radlinski, Y. Yue. "Large-scale validation and analysis of interleaved
search evaluation." ACM TOIS 30(1), 2012.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rankwise._validation import Interval, check_k, check_params, check_positive_int
from rankwise.data.clicklog import ClickLog
from rankwise.errors import InputError

__all__ = ["team_draft", "probabilistic_interleave", "probabilistic_assignment", "probabilistic_outcome",
           "interleave", "Interleaving", "InterleavingResult", "simulated_click_model", "INTERLEAVING_METHODS"]

INTERLEAVING_METHODS = ("team_draft", "probabilistic")


def _check_ranking(x, name):
    x = np.asarray(x)
    if x.ndim != 1 or len(x) == 0:
        raise InputError(f"{name} must be a non-empty 1-d ranking of document ids; got shape {x.shape}")
    if len(np.unique(x)) != len(x):
        raise InputError(f"{name} ranks a document twice")
    return x


def _check_k(k, n):
    return min(check_k(k, whole=n), n)


def _check_tau(tau):
    check_params("probabilistic interleaving", {"tau": tau}, {"tau": [Interval("real", 0, None)]})


def team_draft(a, b, *, k: int | None = None, random_state=None):
    """Team-draft interleaving of rankings ``a`` and ``b`` (document ids, best first).

    Returns ``(shown, team)``: the interleaved list and, per position, 0 where A picked the document
    and 1 where B did. Length ``k`` (default: as long as possible)."""
    a, b = _check_ranking(a, "a"), _check_ranking(b, "b")
    rng = np.random.default_rng(random_state)
    k = _check_k(k, len(np.union1d(a, b)))
    shown, team, used = [], [], set()
    ia = ib = 0
    n_a = n_b = 0
    while len(shown) < k:
        while ia < len(a) and a[ia] in used:
            ia += 1
        while ib < len(b) and b[ib] in used:
            ib += 1
        if ia == len(a) or ib == len(b):
            break
        pick_a = n_a < n_b or (n_a == n_b and rng.random() < 0.5)
        doc = a[ia] if pick_a else b[ib]
        shown.append(doc)
        used.add(doc)
        team.append(0 if pick_a else 1)
        n_a, n_b = n_a + pick_a, n_b + (not pick_a)
    return np.asarray(shown), np.asarray(team, dtype=np.int8)


def _softmax_weights(ranking, docs, tau):
    """r_x(d)^-τ for every doc of ``docs`` (ranks in ``ranking``)."""
    pos = {d: i + 1 for i, d in enumerate(ranking.tolist())}
    return np.array([pos[d] for d in docs.tolist()], dtype=np.float64) ** -float(tau)


def _check_pi(a, b, tau):
    a, b = _check_ranking(a, "a"), _check_ranking(b, "b")
    if len(a) != len(b) or not np.array_equal(np.sort(a), np.sort(b)):
        raise InputError("probabilistic interleaving needs a and b to rank the same documents")
    _check_tau(tau)
    return a, b


def probabilistic_interleave(a, b, *, k: int | None = None, tau: float = 3.0, random_state=None):
    r"""Probabilistic interleaving of rankings ``a`` and ``b`` (the same documents, best first).

    Returns ``(shown, assignment)``: the list of ``k`` documents and the ranker (0 = A, 1 = B) whose
    softmax :math:`P_x(d) \propto r_x(d)^{-\tau}` drew each; the credit uses
    :func:`probabilistic_assignment`, not the drawn assignment."""
    a, b = _check_pi(a, b, tau)
    rng = np.random.default_rng(random_state)
    k = _check_k(k, len(a))
    idx, assign, _ = _pi_draw(_softmax_weights(a, a, tau), _softmax_weights(b, a, tau), k, rng)
    return a[idx], assign


def _pi_draw(wa, wb, k, rng):
    """One probabilistic interleaving of candidates with softmax weights ``wa``, ``wb``: the drawn
    candidates' indices, the drawing ranker (0 = A) and the posterior P(a_i = A | L) of each position."""
    wa_l, wb_l = wa.copy(), wb.copy()
    idx, assign, p_a = np.empty(k, dtype=np.int64), np.empty(k, dtype=np.int8), np.empty(k)
    for i in range(k):
        x = int(rng.random() < 0.5)  # 1: B
        cs = np.cumsum(wb_l if x else wa_l)
        j = int(np.searchsorted(cs, rng.random() * cs[-1], side="right"))
        pa, pb = wa_l[j] / wa_l.sum(), wb_l[j] / wb_l.sum()
        idx[i], assign[i], p_a[i] = j, x, pa / (pa + pb)
        wa_l[j] = wb_l[j] = 0.0
    return idx, assign, p_a


def probabilistic_assignment(a, b, shown, *, tau: float = 3.0) -> np.ndarray:
    r""":math:`P(a_i = A \mid L)` for every position of the shown list L (module docstring)."""
    a, b = _check_pi(a, b, tau)
    shown = _check_ranking(shown, "shown")
    if not np.all(np.isin(shown, a)):
        raise InputError("shown holds a document that a and b do not rank")
    wa, wb = _softmax_weights(a, a, tau), _softmax_weights(b, a, tau)
    idx = {d: i for i, d in enumerate(a.tolist())}
    left = np.ones(len(a), dtype=bool)
    out = np.empty(len(shown))
    for i, d in enumerate(shown.tolist()):
        j = idx[d]
        pa = wa[j] / wa[left].sum()
        pb = wb[j] / wb[left].sum()
        out[i] = pa / (pa + pb)
        left[j] = False
    return out


def probabilistic_outcome(p_a, clicked) -> float:
    r"""Expected outcome :math:`E[\operatorname{sign}(C_A - C_B)]` of one impression, the clicked positions
    assigned to A independently with probabilities ``p_a`` (:func:`probabilistic_assignment`)."""
    p = np.asarray(p_a, dtype=np.float64)[np.asarray(clicked, dtype=bool)]
    dist = np.array([1.0])  # P(C_A - C_B = j - len(clicks so far))
    for pi in p:
        nxt = np.zeros(len(dist) + 1)
        nxt[1:] += dist * pi
        nxt[:-1] += dist * (1.0 - pi)
        dist = nxt
    m = len(p)  # index j ↔ difference 2j - m
    diff = 2 * np.arange(m + 1) - m
    return float(dist[diff > 0].sum() - dist[diff < 0].sum())


@dataclass
class InterleavingResult:
    """Credit of an interleaving experiment.

    ``outcomes``: per impression (session), +1 A wins … -1 B wins (expected outcome for probabilistic
    interleaving); ``queries`` / ``query_outcomes``: the mean outcome per query; ``wins``, ``ties``,
    ``losses``: queries won by A, tied, won by B; ``p_value``: two-sided sign test; ``delta``:
    (wins + ties/2)/n − 1/2; ``preferred``: "A", "B" or None (no query decided)."""

    method: str
    outcomes: np.ndarray
    queries: np.ndarray
    query_outcomes: np.ndarray
    wins: int
    ties: int
    losses: int
    p_value: float
    delta: float

    @property
    def preferred(self):
        return "A" if self.wins > self.losses else "B" if self.losses > self.wins else None


@dataclass
class Interleaving:
    """Interleaved result pages of two rankers (:func:`interleave`).

    ``log``: the pages as a ClickLog with no clicks (draw clicks with a click model's ``sample``);
    ``team``: per row of the log, 0 where A picked the document, 1 where B did (team-draft; for
    probabilistic interleaving the ranker whose softmax drew it); ``p_a``: per row, the posterior
    P(assigned to A | list) the probabilistic credit uses (None for team-draft)."""

    method: str
    log: ClickLog
    team: np.ndarray
    p_a: np.ndarray | None

    def credit(self, clicks) -> InterleavingResult:
        """Outcomes and preference from clicks on these pages: a ClickLog with the same pages (e.g.
        ``model.sample(self.log)``) or a 0/1 array per row of ``self.log``."""
        from scipy.stats import binomtest

        log = self.log
        if isinstance(clicks, ClickLog):
            same = (clicks.n_sessions == log.n_sessions and np.array_equal(clicks.session_offsets, log.session_offsets)
                    and np.array_equal(clicks.docs[clicks.doc], log.docs[log.doc]))
            if not same:
                raise InputError("clicks must be a ClickLog of the same pages as this interleaving's log")
            c = clicks.clicked
        else:
            c = np.asarray(clicks)
            if c.shape != (len(log.doc),) or np.any((c != 0) & (c != 1)):
                raise InputError(f"clicks must be a ClickLog or one 0/1 flag per row of the log ({len(log.doc)},)")
        c = c.astype(bool)
        off = log.session_offsets
        if self.method == "team_draft":
            sid = np.repeat(np.arange(log.n_sessions), np.diff(off))
            n_a = np.bincount(sid, weights=c & (self.team == 0), minlength=log.n_sessions)
            n_b = np.bincount(sid, weights=c & (self.team == 1), minlength=log.n_sessions)
            out = np.sign(n_a - n_b)
        else:
            out = np.array([probabilistic_outcome(self.p_a[s:e], c[s:e]) for s, e in zip(off[:-1], off[1:])])
        qo = np.bincount(log.query, weights=out, minlength=log.n_queries) / np.bincount(log.query, minlength=log.n_queries)
        # an outcome is a mean of ±1 and sums of exact probabilities: |qo| below 1e-12 is a tie
        qo = np.where(np.abs(qo) < 1e-12, 0.0, qo)
        wins, losses = int((qo > 0).sum()), int((qo < 0).sum())
        ties = len(qo) - wins - losses
        p = float(binomtest(wins, wins + losses, 0.5).pvalue) if wins + losses else 1.0
        return InterleavingResult(self.method, out, np.asarray(log.queries), qo, wins, ties, losses, p,
                                  (wins + ties / 2.0) / len(qo) - 0.5)


def interleave(data, scores_a, scores_b, *, n_sessions: int, method: str = "team_draft", k: int | None = 10,
               tau: float = 3.0, random_state=0) -> Interleaving:
    r"""Interleaved pages of ranker A (``scores_a``) and ranker B (``scores_b``) for ``n_sessions``
    impressions, each of a query of ``data`` drawn uniformly.

    Parameters
    ----------
    data : RankingDataset
        Candidates of every query; the pages name documents by its ``doc_ids`` (row numbers when
        it has none) and queries by its ``query_ids``.
    scores_a, scores_b : array (n_rows,)
        The two rankers' scores of every row (each ranks its query by decreasing score, ties by row order).
    n_sessions : int
    method : {"team_draft", "probabilistic"}
    k : int or None, default 10
        Documents per page.
    tau : float, default 3
        Softmax exponent of probabilistic interleaving.
    random_state : int
    """
    from rankwise.data import RankingDataset

    if not isinstance(data, RankingDataset):
        raise InputError(f"data must be a rankwise.data.RankingDataset; got {type(data).__name__}")
    if method not in INTERLEAVING_METHODS:
        raise InputError(f"method must be one of {INTERLEAVING_METHODS}; got {method!r}")
    check_positive_int(n_sessions, "n_sessions")
    off = np.asarray(data.query_offsets, dtype=np.int64)
    n = int(off[-1])
    sa, sb = (np.asarray(s, dtype=np.float64) for s in (scores_a, scores_b))
    for name, s in (("scores_a", sa), ("scores_b", sb)):
        if s.shape != (n,) or not np.all(np.isfinite(s)):
            raise InputError(f"{name} must hold one finite score per row of data ({n},); got shape {s.shape}")
    rng = np.random.default_rng(random_state)
    sess_q = rng.integers(0, len(off) - 1, int(n_sessions))
    rows, sizes, team, p_a = [], [], [], []
    _check_tau(tau)
    rankings, pi_weights = {}, {}
    for q in sess_q:
        if q not in rankings:
            a0, b0 = off[q], off[q + 1]
            rankings[q] = (a0 + np.argsort(-sa[a0:b0], kind="stable"), a0 + np.argsort(-sb[a0:b0], kind="stable"))
            pi_weights[q] = tuple(_softmax_weights(r - a0, np.arange(b0 - a0), tau) for r in rankings[q])
        ra, rb = rankings[q]
        if method == "team_draft":
            shown, t = team_draft(ra, rb, k=k, random_state=rng)
        else:  # candidates in row order; softmax weights r_x(d)^-τ
            j, t, pa = _pi_draw(*pi_weights[q], _check_k(k, len(ra)), rng)
            shown = off[q] + j
            p_a.append(pa)
        rows.append(shown)
        team.append(t)
        sizes.append(len(shown))
    rows = np.concatenate(rows)
    s_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    qids = np.asarray(data.query_ids)
    docs = np.arange(n).astype(str) if data.doc_ids is None else np.asarray(data.doc_ids)
    log = ClickLog.from_arrays(qids[sess_q], [docs[rows[s:e]] for s, e in zip(s_off[:-1], s_off[1:])],
                               [np.zeros(e - s, dtype=np.uint8) for s, e in zip(s_off[:-1], s_off[1:])])
    return Interleaving(method, log, np.concatenate(team), np.concatenate(p_a) if p_a else None)


def simulated_click_model(name: str, log: ClickLog, attractiveness, *, examination=None, satisfaction=None):
    r"""A click model of :data:`rankwise.clicks.CLICK_MODELS` with known parameters, to draw simulated
    clicks on ``log``'s pages with its ``sample(log)``.

    ``attractiveness``: α per row of ``log`` (one value per (query, doc); e.g. the simulated relevance
    :func:`~rankwise.clicks.click_noise` of the document's grade); ``examination``: γ per rank for
    ``"PBM"`` (θ, at least the log's longest page); ``satisfaction``: σ per row for ``"SDBN"`` (the
    probability of stopping after a click); ``"CM"`` (the cascade model) needs neither.
    """
    from rankwise.clicks.models import CLICK_MODELS

    if name not in ("PBM", "CM", "SDBN"):
        raise InputError(f"name must be 'PBM', 'CM' or 'SDBN'; got {name!r}")
    n = len(log.doc)

    def per_pair(values, what):
        v = np.asarray(values, dtype=np.float64)
        if v.shape != (n,) or np.any(v < 0) or np.any(v > 1) or not np.all(np.isfinite(v)):
            raise InputError(f"{what} must hold one probability in [0, 1] per row of the log ({n},)")
        out = np.zeros(log.n_pairs)
        out[log.pair] = v
        if not np.allclose(out[log.pair], v):
            raise InputError(f"{what} must be the same on every row of a (query, doc) pair")
        return out

    model = CLICK_MODELS[name](max_iter=1).fit(log)  # sets the (query, doc) index; parameters replaced below
    model.alpha_ = per_pair(attractiveness, "attractiveness")
    if name == "PBM":
        if examination is None:
            raise InputError("PBM needs examination (γ per rank)")
        g = np.asarray(examination, dtype=np.float64)
        if g.ndim != 1 or len(g) < log.max_rank or np.any(g < 0) or np.any(g > 1):
            raise InputError(f"examination must hold a probability per rank for ranks 1..{log.max_rank}")
        model.gamma_ = g[: log.max_rank].copy()
    elif name == "SDBN":
        if satisfaction is None:
            raise InputError("SDBN needs satisfaction (σ per row)")
        model.sigma_ = per_pair(satisfaction, "satisfaction")
    return model
