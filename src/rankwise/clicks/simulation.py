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

Logging policies (step 2, issue 26). ``temperature=None`` is the deterministic production ranker above.
A number ``temperature=T`` makes the logger *stochastic*: every session samples its page from the
Plackett–Luce policy with logits score/T (:class:`~rankwise.clicks.PlackettLucePolicy`, Gumbel-max
draws), so every candidate has a non-zero chance of reaching the top k and the policy-aware estimator
(:func:`~rankwise.clicks.click_dataset` with the policy's propensities) is unbiased for all of them
(Oosterhuis & de Rijke, SIGIR 2020). ``n_loggers=L`` trains L production rankers, each on its own
random ``production_fraction`` of the queries, and splits the sessions between them at random (the
logger of each session in ``log.session_data["logger"]``): the same (query, document) is shown at
different ranks by different loggers, the interventions that intervention harvesting uses (Agarwal,
Zaitsev, Wang, Li, Najork & Joachims, WSDM 2019). ``temperature=0`` with ``n_loggers=1`` is the
deterministic logger. Every simulated session log carries, per displayed row, the probability that
its logger shows that document (``log.row_data["inclusion"]``) and, under the PBM, its policy-aware
propensity :math:`\rho_{qd} = \sum_k P_\pi(\mathrm{rank}(d) = k)\,\theta_k` under that logger
(``log.row_data["exposure"]``); ``ClickSimulation.policy`` is the logging policy (a
:class:`~rankwise.clicks.PolicyMixture` for several loggers).

Bias profiles (issue 26, item 6). Besides θ_k = (1/k)^η, ``position_bias`` takes an examination curve
per rank (an array, e.g. :func:`read_bias_curve` of the position-bias curves estimated on Baidu's
real search logs), and ``click_model="matrix"`` draws each click directly from a table of P(click |
grade, rank) (``click_matrix``, e.g. :func:`read_click_matrix` of ULTRA's TianGong-ST click matrix),
so results can be shown under bias that is not a power law.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import json
import warnings
from pathlib import Path

from rankwise._validation import Interval, check_params
from rankwise.data.clicklog import ClickCounts, ClickLog
from rankwise.errors import InputError, ParseError

__all__ = ["simulate_clicks_protocol", "ClickSimulation", "click_noise", "read_bias_curve", "read_click_matrix"]


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

    ``log``: the session log (a :class:`~rankwise.data.ClickLog`; query ids of the data set, documents =
    row numbers of ``train``); ``counts``: its aggregate (:class:`~rankwise.data.ClickCounts`), which is
    all that ``aggregate=True`` draws (then there is no session log: ``log`` of such a simulation still
    returns the counts, with a ``DeprecationWarning``; use ``counts``);
    ``features``: ``train`` with those row numbers as ``doc_ids`` (the ``features`` argument of
    :func:`~rankwise.clicks.click_dataset`);
    ``propensity``: the true examination θ_k per rank (PBM; None for the cascade and the click matrix);
    ``relevance``: ρ(y) per train row (the click noise of the PBM and the cascade);
    ``production``: the (first) production ranker; ``production_queries``: the queries it was trained on;
    ``policy``: the logging policy over the rows of ``features`` (a :class:`~rankwise.clicks.PlackettLucePolicy`,
    temperature 0 for the deterministic logger, or a :class:`~rankwise.clicks.PolicyMixture` of several);
    ``loggers``: every production ranker; ``click_matrix``: P(click | grade, rank) of ``click_model="matrix"``."""

    session_log: ClickLog | None
    features: object
    propensity: np.ndarray | None
    relevance: np.ndarray
    production: object
    production_queries: np.ndarray
    top_k: int | None
    aggregate_counts: ClickCounts | None = None
    policy: object = None
    loggers: list = field(default_factory=list)
    click_matrix: np.ndarray | None = None

    @property
    def log(self) -> ClickLog:
        """The session log. (Of an ``aggregate=True`` simulation: its counts, deprecated; use :attr:`counts`.)"""
        if self.session_log is None:
            warnings.warn("ClickSimulation.log of an aggregate simulation is a ClickCounts, not a session log; "
                          "use ClickSimulation.counts (ClickSimulation.log will be None for aggregate simulations)",
                          DeprecationWarning, stacklevel=2)
            return self.aggregate_counts
        return self.session_log

    @property
    def counts(self) -> ClickCounts:
        """The aggregated log: what ``aggregate=True`` drew, or the session log's :meth:`~ClickLog.counts`."""
        if self.aggregate_counts is None:
            self.aggregate_counts = self.session_log.counts()
        return self.aggregate_counts

    def policy_propensities(self):
        """The true policy-aware propensities ρ_qd of every row of ``features`` (the ``propensity`` of
        :func:`~rankwise.clicks.click_dataset` for the policy-aware labels); PBM only."""
        if self.propensity is None:
            raise InputError("policy-aware propensities need the examination per rank (click_model='pbm')")
        return self.policy.propensities(self.propensity)


_PROTOCOL_CONSTRAINTS = {
    "production_fraction": [Interval("real", 0, 1, closed="right")],
    "n_sessions": [Interval("int", 1, None)],
    "top_k": [Interval("int", 1, None), None],  # None: the whole list
    "eta": [Interval("real", 0, None)],
    "n_loggers": [Interval("int", 1, None)],
    "temperature": [Interval("real", 0, None), None],  # None: deterministic logging rankers
}


def simulate_clicks_protocol(train, *, n_sessions: int = 100_000, eta: float = 1.0, click_model: str = "pbm",
                             eps_plus: float = 1.0, eps_minus: float = 0.1, top_k: int | None = 10,
                             production_fraction: float = 0.01, production=None, random_state=0,
                             aggregate: bool = False, temperature: float | None = None, n_loggers: int = 1,
                             position_bias=None, click_matrix=None) -> ClickSimulation:
    """Steps 1-3 of the protocol (module docstring) on the training part of a LETOR data set.

    Parameters
    ----------
    train : RankingDataset
        Graded training data (its true labels drive the clicks).
    n_sessions : int
    eta : float
        Severity of the position bias, θ_k = (1/k)^η (PBM), unless ``position_bias`` is given.
    click_model : {"pbm", "cascade", "matrix"}
        ``"matrix"``: a click at rank k on a document of grade y with probability ``click_matrix[y, k-1]``
        (no separate examination; ``eta``, ``position_bias`` and the click noise are not used).
    eps_plus, eps_minus : float
        Click noise on the most relevant and on irrelevant documents.
    top_k : int or None
        Display depth: documents per result page, or ``None`` for the whole ranked list
        (module docstring). Propensities are given for ranks 1..(longest page).
    production_fraction : float
        Share of the training queries the production ranker is trained on (at least 2 queries).
    production : ranker, optional
        The production ranker (default: a ``LinearRanker`` with the ListNet loss); with ``n_loggers > 1``
        each logger is a clone of it (:func:`sklearn.base.clone`).
    random_state : int
    aggregate : bool, default False
        Draw the aggregated log (:class:`~rankwise.clicks.ClickCounts`, :attr:`ClickSimulation.counts`)
        instead of the sessions, PBM and one deterministic logger only: the sessions of each query are
        Multinomial(n_sessions, uniform) and, since every
        session of a query shows the same page and PBM clicks are independent, the clicks of the
        document at rank k are Binomial(n_q, θ_k ρ) — the distribution of the session log's counts,
        in memory and time proportional to the documents, not the sessions (10⁸ sessions are cheap).
        Queries drawn by no session are left out, as in the session log.
    temperature : float >= 0 or None
        ``None``: the deterministic production ranker. A number: every page is sampled from the
        Plackett–Luce policy with logits score/temperature (module docstring; 0 is deterministic).
    n_loggers : int
        Production rankers (each trained on its own random share of the queries), the sessions split
        between them uniformly at random (``log.session_data["logger"]``).
    position_bias : array, optional
        Examination probability per rank 1..R (R at least the longest page, values in (0, 1]) instead of
        (1/k)^η, e.g. ``read_bias_curve(path)``.
    click_matrix : array (G, R) or path, optional
        P(click | grade, rank) of ``click_model="matrix"``, rows = grades 0..G-1 (every label of ``train``
        must be one of them), R at least the longest page; a path is read by :func:`read_click_matrix`.

    Returns
    -------
    ClickSimulation
    """
    from rankwise.data import RankingDataset

    if not isinstance(train, RankingDataset):
        raise InputError(f"train must be a RankingDataset; got {type(train).__name__}")
    if click_model not in ("pbm", "cascade", "matrix"):
        raise InputError(f"click_model must be 'pbm', 'cascade' or 'matrix'; got {click_model!r}")
    check_params("simulate_clicks_protocol", dict(production_fraction=production_fraction, n_sessions=n_sessions,
                                                  top_k=top_k, eta=eta, n_loggers=n_loggers, temperature=temperature),
                 _PROTOCOL_CONSTRAINTS)
    if not (0 <= eps_minus <= eps_plus <= 1):
        raise InputError(f"need 0 <= eps_minus <= eps_plus <= 1; got {eps_minus}, {eps_plus}")
    if aggregate and click_model != "pbm":
        raise InputError("aggregate=True needs click_model='pbm' (cascade clicks of a session depend on each other, "
                         "so per-document counts do not determine the log)")
    stochastic = temperature is not None and temperature > 0
    if aggregate and (stochastic or n_loggers > 1):
        raise InputError("aggregate=True needs one deterministic logger (temperature=None or 0, n_loggers=1): "
                         "with a stochastic or several loggers the pages of a query differ between sessions")
    if click_model == "matrix":
        if click_matrix is None:
            raise InputError("click_model='matrix' needs click_matrix= (an array (grades, ranks) or a path)")
        click_matrix = _check_click_matrix(click_matrix, train.labels)
    elif click_matrix is not None:
        raise InputError(f"click_matrix is the table of click_model='matrix'; got click_model={click_model!r}")
    rng = np.random.default_rng(random_state)
    nq = train.n_queries
    n_prod = min(nq, max(2, int(round(production_fraction * nq))))
    prod_q = np.sort(rng.choice(nq, n_prod, replace=False))
    if production is None:
        from rankwise.models import LinearRanker

        production = LinearRanker(loss="listnet", random_state=int(random_state))
    loggers, logger_q = [production], [prod_q]
    if n_loggers > 1:
        from sklearn.base import clone

        for _ in range(1, n_loggers):
            logger_q.append(np.sort(rng.choice(nq, n_prod, replace=False)))
            loggers.append(clone(production))
    production.fit(train.take(prod_q))
    scores = np.asarray(production.predict(train.X), dtype=np.float64)
    all_scores = [scores]
    for model, q_l in zip(loggers[1:], logger_q[1:]):
        model.fit(train.take(q_l))
        all_scores.append(np.asarray(model.predict(train.X), dtype=np.float64))
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
    if position_bias is None:
        theta = (1.0 / np.arange(1, int(sizes.max()) + 1)) ** float(eta)
    else:
        theta = _check_position_bias(position_bias, int(sizes.max()))
    theta_out = theta if click_model == "pbm" else None
    from rankwise.clicks.policy import PlackettLucePolicy, PolicyMixture

    policies = [PlackettLucePolicy(sc, off, temperature=float(temperature or 0.0), top_k=top_k) for sc in all_scores]
    policy = policies[0] if n_loggers == 1 else PolicyMixture(policies)
    result = dict(features=features, propensity=theta_out, relevance=rho, production=production,
                  production_queries=qids[prod_q], top_k=None if top_k is None else int(top_k), policy=policy,
                  loggers=loggers, click_matrix=click_matrix)
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
        return ClickSimulation(None, aggregate_counts=counts, **result)
    sess_q = rng.integers(0, nq, int(n_sessions))
    session_data = {}
    if stochastic or n_loggers > 1:
        logger = rng.integers(0, n_loggers, int(n_sessions)) if n_loggers > 1 else np.zeros(int(n_sessions), np.int64)
        if n_loggers > 1:
            session_data["logger"] = logger
        s_sizes = sizes[sess_q]
        s_off = np.concatenate([[0], np.cumsum(s_sizes)]).astype(np.int64)
        rows = np.empty(s_off[-1], dtype=np.int64)
        seeds = rng.integers(0, 2 ** 63 - 1, n_loggers)
        within = np.arange(s_off[-1]) - np.repeat(s_off[:-1], s_sizes)
        for j, pol in enumerate(policies):
            sess = np.flatnonzero(logger == j)
            o, r = pol.sample(sess_q[sess], random_state=int(seeds[j]))
            rows[np.repeat(s_off[sess], np.diff(o)) + (np.arange(len(r)) - np.repeat(o[:-1], np.diff(o)))] = r
        row_logger = np.repeat(logger, s_sizes)
    else:
        s_sizes = sizes[sess_q]
        s_off = np.concatenate([[0], np.cumsum(s_sizes)]).astype(np.int64)
        within = np.arange(s_off[-1]) - np.repeat(s_off[:-1], s_sizes)
        rows = page_rows[np.repeat(page_off[sess_q], s_sizes) + within]
        row_logger = np.zeros(len(rows), dtype=np.int64)
    rank = within + 1
    u = rng.random(len(rows))
    if click_model == "pbm":
        clicked = (u < theta[rank - 1] * rho[rows]).astype(np.uint8)
    elif click_model == "matrix":
        clicked = (u < click_matrix[train.labels[rows].astype(np.int64), rank - 1]).astype(np.uint8)
    else:
        from rankwise.clicks import _kernels as K

        clicked = np.zeros(len(rows), dtype=np.uint8)
        a = rho[rows]
        K.simulate_cascade(s_off, a, np.ones_like(a), 1.0 - sat[rows], u, rng.random(len(rows)), clicked)
    from rankwise.data.clicklog import _codes

    row_data = {}
    marg = [p.rank_marginals() for p in policies]
    row_data["inclusion"] = np.empty(len(rows))
    if theta_out is not None:
        row_data["exposure"] = np.empty(len(rows))
    for j, P in enumerate(marg):
        here = row_logger == j
        row_data["inclusion"][here] = P[rows[here]].sum(axis=1)
        if theta_out is not None:
            row_data["exposure"][here] = P[rows[here]] @ theta[: P.shape[1]]
    qc, qv = _codes(qids[sess_q])
    dc, dv = _codes(rows)
    log = ClickLog(s_off, qc, qv, dc, dv, clicked, session_data=session_data, row_data=row_data)
    return ClickSimulation(log, **result)


def _check_position_bias(curve, n_ranks):
    t = np.asarray(curve, dtype=np.float64) if not isinstance(curve, (str, Path)) else read_bias_curve(curve)
    if t.ndim != 1 or len(t) < n_ranks:
        raise InputError(f"position_bias must give the examination probability at every rank 1..{n_ranks} (the "
                         f"longest page); got shape {t.shape}")
    t = t[:n_ranks]
    if not np.all(np.isfinite(t)) or np.any(t <= 0) or np.any(t > 1):
        i = int(np.flatnonzero(~(np.isfinite(t) & (t > 0) & (t <= 1)))[0])
        raise InputError(f"position_bias must be in (0, 1] at every displayed rank; rank {i + 1} has {t[i]!r}")
    return t


def _check_click_matrix(matrix, labels):
    m = read_click_matrix(matrix) if isinstance(matrix, (str, Path)) else np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or not np.all(np.isfinite(m)) or np.any(m < 0) or np.any(m > 1):
        raise InputError("click_matrix must be a 2-d array (grades, ranks) of probabilities in [0, 1]")
    y = np.asarray(labels, dtype=np.float64)
    if np.any(y != np.round(y)) or y.min(initial=0) < 0 or y.max(initial=0) >= m.shape[0]:
        raise InputError(f"click_matrix has rows for grades 0..{m.shape[0] - 1}; the labels must be integers in that "
                         f"range, got {np.unique(y)[:10].tolist()}")
    return m


def read_bias_curve(path, *, max_rank: int | None = None) -> np.ndarray:
    """Read a position-bias curve: a CSV ``position,<name>`` with one row per 1-based position (1, 2, ...)
    and the relative examination probability there (e.g. the Baidu-ULTR curves of ``click_fixtures``).

    Returns the float64 array over positions 1..R (R = ``max_rank``, or every row of the file). An empty
    cell, a 0 (the Baidu files' mark for "no estimate"), a negative or non-numeric value within the
    positions read is a :class:`~rankwise.errors.ParseError` naming the file and line (pass ``max_rank``
    to read only the positions before it); positions must run 1, 2, 3, ... without gaps.
    """
    path = Path(path)
    check_params("read_bias_curve", {"max_rank": max_rank}, {"max_rank": [Interval("int", 1, None), None]})
    if not path.is_file():
        raise InputError(f"position-bias curve {path} does not exist")
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or [c.strip().lower() for c in lines[0].split(",")][:1] != ["position"] or \
            len(lines[0].split(",")) != 2:
        raise ParseError(path, 1, f"expected the header 'position,<name>'; got {lines[0][:60] if lines else ''!r}")
    values = []
    for no, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        if max_rank is not None and len(values) == max_rank:
            break
        cells = line.split(",")
        if len(cells) != 2:
            raise ParseError(path, no, f"expected 2 cells 'position,value'; got {line[:60]!r}")
        try:
            pos = int(cells[0])
        except ValueError:
            raise ParseError(path, no, f"position must be an integer; got {cells[0]!r}") from None
        if pos != len(values) + 1:
            raise ParseError(path, no, f"expected position {len(values) + 1}; got {pos}")
        hint = " (pass max_rank= to read only the positions before it)"
        if not cells[1].strip():
            raise ParseError(path, no, f"position {pos} has no value (no estimate){hint}")
        try:
            v = float(cells[1])
        except ValueError:
            raise ParseError(path, no, f"position {pos}: value must be a number; got {cells[1]!r}") from None
        if not np.isfinite(v) or v <= 0:
            raise ParseError(path, no, f"position {pos}: the examination probability must be > 0 and finite; "
                                       f"got {v!r} (0 marks a missing estimate in the Baidu files){hint}")
        values.append(v)
    if not values:
        raise ParseError(path, None, "no positions")
    if max_rank is not None and len(values) < max_rank:
        raise ParseError(path, None, f"has {len(values)} positions; max_rank={max_rank} asked for more")
    return np.asarray(values, dtype=np.float64)


def read_click_matrix(path) -> np.ndarray:
    """P(click | grade, rank) as an array (grades, ranks) from an ULTRA click-model JSON file
    (``model_name`` ``click_matrix_model``: its ``click_prob`` matrix, e.g. the TianGong-ST one;
    ``position_biased_model``: ``click_prob[grade] * exam_prob[rank]``). Ranks are 1-based columns."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"click model {path} does not exist")
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ParseError(path, exc.lineno, f"not valid JSON: {exc.msg}") from None
    if not isinstance(cfg, dict) or "model_name" not in cfg or "click_prob" not in cfg:
        raise ParseError(path, None, "expected an object with 'model_name' and 'click_prob' (an ULTRA click model)")
    name = cfg["model_name"]
    try:
        if name == "click_matrix_model":
            m = np.asarray(cfg["click_prob"], dtype=np.float64)
        elif name == "position_biased_model":
            m = np.outer(np.asarray(cfg["click_prob"], dtype=np.float64),
                         np.asarray(cfg["exam_prob"], dtype=np.float64))
        else:
            raise ParseError(path, None, f"model_name {name!r} is not a click matrix; read_click_matrix takes "
                                         "'click_matrix_model' and 'position_biased_model'")
    except (TypeError, ValueError, KeyError) as exc:
        raise ParseError(path, None, f"click_prob/exam_prob must be numbers in a rectangular table: {exc}") from None
    if m.ndim != 2 or m.size == 0 or not np.all(np.isfinite(m)) or np.any(m < 0) or np.any(m > 1):
        raise ParseError(path, None, f"the click matrix must be a non-empty (grades, ranks) table of probabilities "
                                     f"in [0, 1]; got shape {m.shape}")
    return m
