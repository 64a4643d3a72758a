r"""The simulation protocol of unbiased learning-to-rank research, as one function.

From graded LETOR data (Joachims et al. 2017, §6; Ai et al. 2018, §5.1; Wang et al. 2018):

1. a *production ranker* is trained on the true labels of a small share of the training queries
   (``production_fraction``, 1% in Ai et al.);
2. it ranks every training query; the result page shows the top ``top_k`` documents, or the whole
   ranked list with ``top_k=None`` (the *display depth*, see below);
3. ``n_sessions`` sessions draw a training query uniformly and clicks on its page from

   - ``click_model="pbm"``: :math:`P(C = 1) = \theta_k \, \rho(y)`, :math:`\theta_k = (1/k)^\eta`;
   - ``click_model="cascade"``: the user scans down, clicks with probability ρ(y) and, after a
     click, stops with probability :math:`(2^y - 1)/(2^{y_{max}} - 1)` (the SDBN with
     satisfaction = the graded relevance);

   where :math:`\rho(y) = \epsilon^- + (\epsilon^+ - \epsilon^-)\frac{2^y - 1}{2^{y_{max}} - 1}` is the
   click noise (ε⁻ on irrelevant documents, ε⁺ on the most relevant);
4. a ranker is trained on the clicks (:func:`rankwise.clicks.fit_debiased`) and scored on the true
   labels of the test queries.

:func:`simulate_clicks_protocol` does steps 1-3 and returns the log with everything needed for
step 4.

Display depth. The IPS estimator of Joachims, Swaminathan & Schnabel (WSDM 2017) is unbiased when
every document of the ranking has a non-zero examination propensity; ``top_k=None`` shows the
production ranker's whole list, examined with :math:`\theta_k = (1/k)^\eta` down to its last rank,
which meets that condition. A result page of the top k only (``top_k=10``, like a real search page)
adds *item-selection bias*: documents below rank k are never shown, their propensity is zero and no
propensity correction recovers them: existing counterfactual LTR is unbiased only if users are
shown all relevant items (Oosterhuis & de Rijke, SIGIR 2020, who need a stochastic logging policy
for top-k). A ranker debiased by IPS on top-k clicks is therefore compared with a ranker on the true
labels of *all* documents at a disadvantage that IPS cannot remove.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rankwise.data.clicklog import ClickCounts, ClickLog
from rankwise.errors import InputError

__all__ = ["simulate_clicks_protocol", "ClickSimulation", "click_noise"]


def click_noise(labels, *, eps_plus: float = 1.0, eps_minus: float = 0.1, max_grade=None) -> np.ndarray:
    r""":math:`\rho(y) = \epsilon^- + (\epsilon^+ - \epsilon^-)(2^y - 1)/(2^{y_{max}} - 1)`: the probability
    that a user who examines a document of grade y finds it relevant (Ai et al. 2018, §5.1)."""
    y = np.asarray(labels, dtype=np.float64)
    ymax = float(np.max(y, initial=0.0)) if max_grade is None else float(max_grade)
    if ymax <= 0:
        return np.full(y.shape, float(eps_minus))
    return eps_minus + (eps_plus - eps_minus) * (2.0 ** y - 1.0) / (2.0 ** ymax - 1.0)


@dataclass
class ClickSimulation:
    """Output of :func:`simulate_clicks_protocol`.

    ``log``: the click log (query ids of the data set; documents = row numbers of ``train``), a
    :class:`~rankwise.clicks.ClickCounts` with ``aggregate=True``;
    ``features``: ``train`` with those row numbers as ``doc_ids`` (the ``features`` argument of
    :func:`~rankwise.clicks.click_dataset`);
    ``propensity``: the true θ_k (PBM; None for the cascade); ``relevance``: ρ(y) per train row;
    ``production``: the production ranker; ``production_queries``: the queries it was trained on."""

    log: ClickLog | ClickCounts
    features: object
    propensity: np.ndarray | None
    relevance: np.ndarray
    production: object
    production_queries: np.ndarray
    top_k: int | None


def simulate_clicks_protocol(train, *, n_sessions: int = 100_000, eta: float = 1.0, click_model: str = "pbm",
                             eps_plus: float = 1.0, eps_minus: float = 0.1, top_k: int | None = 10,
                             production_fraction: float = 0.01, production=None, random_state=0,
                             aggregate: bool = False) -> ClickSimulation:
    """Steps 1-3 of the protocol (module docstring) on the training part of a LETOR data set.

    Parameters
    ----------
    train : RankingDataset
        Graded training data (its true labels drive the clicks).
    n_sessions : int
    eta : float
        Severity of the position bias, θ_k = (1/k)^η (PBM).
    click_model : {"pbm", "cascade"}
    eps_plus, eps_minus : float
        Click noise on the most relevant and on irrelevant documents.
    top_k : int or None
        Display depth: documents per result page, or ``None`` for the whole ranked list
        (module docstring). Propensities are given for ranks 1..(longest page).
    production_fraction : float
        Share of the training queries the production ranker is trained on (at least 2 queries).
    production : ranker, optional
        The production ranker (default: a ``LinearRanker`` with the ListNet loss).
    random_state : int
    aggregate : bool, default False
        Draw the aggregated log (:class:`~rankwise.clicks.ClickCounts`) instead of the sessions, PBM
        only: the sessions of each query are Multinomial(n_sessions, uniform) and, since every
        session of a query shows the same page and PBM clicks are independent, the clicks of the
        document at rank k are Binomial(n_q, θ_k ρ) — the distribution of the session log's counts,
        in memory and time proportional to the documents, not the sessions (10⁸ sessions are cheap).
        Queries drawn by no session are left out, as in the session log.

    Returns
    -------
    ClickSimulation
    """
    from rankwise.data import RankingDataset

    if not isinstance(train, RankingDataset):
        raise InputError(f"train must be a RankingDataset; got {type(train).__name__}")
    if click_model not in ("pbm", "cascade"):
        raise InputError(f"click_model must be 'pbm' or 'cascade'; got {click_model!r}")
    if not 0 < production_fraction <= 1:
        raise InputError(f"production_fraction must be in (0, 1]; got {production_fraction}")
    if not (0 <= eps_minus <= eps_plus <= 1):
        raise InputError(f"need 0 <= eps_minus <= eps_plus <= 1; got {eps_minus}, {eps_plus}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer))):
        raise InputError(f"top_k must be a positive integer or None (the whole list); got {top_k!r}")
    if int(n_sessions) < 1 or (top_k is not None and int(top_k) < 1):
        raise InputError("n_sessions and top_k must be positive")
    if eta < 0:
        raise InputError(f"eta must be >= 0; got {eta}")
    if aggregate and click_model != "pbm":
        raise InputError("aggregate=True needs click_model='pbm' (cascade clicks of a session depend on each other, "
                         "so per-document counts do not determine the log)")
    rng = np.random.default_rng(random_state)
    nq = train.n_queries
    n_prod = min(nq, max(2, int(round(production_fraction * nq))))
    prod_q = np.sort(rng.choice(nq, n_prod, replace=False))
    if production is None:
        from rankwise.models import LinearRanker

        production = LinearRanker(loss="listnet", random_state=int(random_state))
    production.fit(train.take(prod_q))
    scores = np.asarray(production.predict(train.X), dtype=np.float64)
    off = train.query_offsets
    # pages: top_k rows of each query by production score (ties by row order)
    pages = []
    for q in range(nq):
        a, b = off[q], off[q + 1]
        order = np.argsort(-scores[a:b], kind="stable")[:top_k]
        pages.append(a + order)
    sizes = np.array([len(p) for p in pages])
    page_rows = np.concatenate(pages)
    page_off = np.concatenate([[0], np.cumsum(sizes)])
    ymax = float(np.max(train.labels))
    rho = click_noise(train.labels, eps_plus=eps_plus, eps_minus=eps_minus, max_grade=ymax)
    sat = (2.0 ** train.labels - 1) / (2.0 ** ymax - 1) if ymax > 0 else np.zeros(len(train.labels))
    qids = np.asarray(train.query_ids)
    features = RankingDataset(train.X, train.labels, train.query_offsets, train.query_ids,
                              doc_ids=np.arange(len(train.labels)).astype(str), feature_names=train.feature_names)
    theta = (1.0 / np.arange(1, int(sizes.max()) + 1)) ** float(eta)
    if aggregate:
        n_q = rng.multinomial(int(n_sessions), np.full(nq, 1.0 / nq))
        kept = np.flatnonzero(n_q > 0)
        code = np.full(nq, -1, dtype=np.int64)
        code[kept] = np.arange(len(kept))
        q_page = np.repeat(np.arange(nq), sizes)
        sel = n_q[q_page] > 0
        rank_page = (np.arange(len(page_rows)) - np.repeat(page_off[:-1], sizes) + 1)[sel]
        imp = n_q[q_page][sel]
        clicks = rng.binomial(imp, theta[rank_page - 1] * rho[page_rows[sel]])
        counts = ClickCounts(qids[kept], n_q[kept], code[q_page[sel]], page_rows[sel], np.arange(int(sel.sum())),
                             rank_page, clicks, imp)
        return ClickSimulation(counts, features, theta, rho, production, qids[prod_q],
                               None if top_k is None else int(top_k))
    sess_q = rng.integers(0, nq, int(n_sessions))
    s_sizes = sizes[sess_q]
    s_off = np.concatenate([[0], np.cumsum(s_sizes)]).astype(np.int64)
    within = np.arange(s_off[-1]) - np.repeat(s_off[:-1], s_sizes)
    rows = page_rows[np.repeat(page_off[sess_q], s_sizes) + within]
    rank = within + 1
    u = rng.random(len(rows))
    if click_model == "pbm":
        clicked = (u < theta[rank - 1] * rho[rows]).astype(np.uint8)
    else:
        from rankwise.clicks import _kernels as K

        clicked = np.zeros(len(rows), dtype=np.uint8)
        a = rho[rows]
        K.simulate_cascade(s_off, a, np.ones_like(a), 1.0 - sat[rows], u, rng.random(len(rows)), clicked)
    from rankwise.data.clicklog import _codes

    qc, qv = _codes(qids[sess_q])
    dc, dv = _codes(rows)
    log = ClickLog(s_off, qc, qv, dc, dv, clicked)
    return ClickSimulation(log, features, theta if click_model == "pbm" else None, rho, production, qids[prod_q],
                            None if top_k is None else int(top_k))
