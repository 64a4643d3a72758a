r"""Stochastic logging policies and their rank marginals: what the policy-aware estimators need.

A *Plackett–Luce logging policy* ranks the candidates of a query by sampling without replacement with
probabilities proportional to :math:`w_d = \exp(s_d / T)`, :math:`s_d` the production ranker's score
and :math:`T` the ``temperature``; the result page shows the first ``top_k``. ``temperature=0`` is the
deterministic production ranker (ties by row order), large T the uniform random ranking. Sampling uses
the Gumbel-max trick: adding independent standard Gumbel noise to :math:`s_d/T` and sorting gives an
exact Plackett–Luce ranking (Yellott 1977; Gumbel top-k, Kool et al. ICML 2019).

Rank marginals. :math:`P_\pi(\mathrm{rank}(d) = k \mid q)` for k = 1..K (K = ``top_k``) is computed
exactly by one integral (``method="exact"``). Plackett–Luce is the order of arrival of independent
exponential clocks :math:`E_i \sim \mathrm{Exp}(w_i)` (the Gumbel-max trick with :math:`E = e^{-G}/w`),
so :math:`d` is at rank k when exactly k−1 other clocks ring before :math:`E_d`:

.. math:: P(\mathrm{rank}(d) = k) = \int_0^\infty w_d e^{-w_d t}\,
          \Pr\Big[\sum_{i \ne d} B_i(t) = k - 1\Big]\, dt,
          \qquad B_i(t) \sim \mathrm{Bernoulli}(1 - e^{-w_i t}),

a Poisson-binomial probability inside, computed for every d at once by prefix and suffix dynamic
programmes over the candidates (O(n K²) per node). In :math:`x = \log t` the integrand is analytic and
decays double-exponentially, so the trapezoidal rule on a uniform grid (step 1/5, over the union of
the windows :math:`\log w_d + x \in [-32, 3.7]` outside which a candidate's integrand is below
:math:`10^{-13}`) is accurate to about :math:`10^{-12}` (against enumeration of all rankings in the tests:
:math:`10^{-14}`); every column sums to 1 over the candidates, which is
checked on every call (``marginal_error_``). ``method="mc"`` estimates the marginals from
``n_samples`` sampled rankings per query instead, with standard error :math:`\sqrt{p(1-p)/n}`.

Exposure. With examination :math:`\theta_k` per rank, the *policy-aware propensity* of a candidate is
:math:`\rho_{qd} = \sum_{k \le K} P_\pi(\mathrm{rank}(d)=k \mid q)\, \theta_k` (Oosterhuis & de Rijke,
SIGIR 2020): the probability that it is shown and examined. It is > 0 for every candidate
under a stochastic policy with T > 0, also below the top k — the condition under which clicks from a
top-k page are an unbiased estimate of the relevance of every candidate (:func:`rankwise.clicks.
click_dataset` with ``policy=``).

References
----------
H. Oosterhuis, M. de Rijke, "Policy-Aware Unbiased Learning to Rank for Top-k Rankings", SIGIR 2020.
R. L. Plackett, "The analysis of permutations", Applied Statistics 24, 1975.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rankwise._validation import Interval, check_k, check_params, check_positive_int
from rankwise.errors import InputError

__all__ = ["PlackettLucePolicy", "PolicyMixture", "PolicyPropensity"]

_GRID_STEP = 0.2
_WINDOW = (-32.0, 3.7)  # log(w_d t): below, the integrand mass is < e^-32; above, < exp(-e^3.7)
_MAX_BLOCK = 4_000_000  # floats of one (nodes x candidates x ranks) block


def _check_theta(theta, n_ranks):
    t = np.asarray(theta, dtype=np.float64)
    if t.ndim != 1 or len(t) < n_ranks:
        raise InputError(f"propensity must be a 1-d array over ranks 1..R with R >= {n_ranks} (the longest page); "
                         f"got shape {t.shape}")
    if not np.all(np.isfinite(t)) or np.any(t < 0):
        raise InputError("propensity must be finite and >= 0 at every rank")
    return t[:n_ranks]


class _Exposing:
    """What every logging policy derives from its rank marginals."""

    def inclusion(self, **kw) -> np.ndarray:
        """P(shown on the page) of every row: the rank marginals summed over k = 1..K."""
        return self.rank_marginals(**kw).sum(axis=1)

    def exposure(self, propensity, **kw) -> np.ndarray:
        r""":math:`\rho_{qd} = \sum_k P_\pi(\mathrm{rank}(d)=k)\,\theta_k` of every row (``propensity`` θ over
        ranks 1..R, R at least the longest page); keyword arguments go to :meth:`rank_marginals`."""
        P = self.rank_marginals(**kw)
        return P @ _check_theta(propensity, P.shape[1])

    def propensities(self, propensity, **kw) -> "PolicyPropensity":
        """The policy-aware propensities for θ = ``propensity``, in the form :func:`~rankwise.clicks.click_dataset`
        and :func:`~rankwise.clicks.fit_debiased` take as their ``propensity`` argument."""
        theta = np.asarray(propensity, dtype=np.float64)
        return PolicyPropensity(self.exposure(theta, **kw), theta, self)


class PlackettLucePolicy(_Exposing):
    r"""A Plackett–Luce logging policy over the rows of a ranking data set (module docstring).

    Parameters
    ----------
    scores : array (n_rows,)
        The production ranker's score of every candidate (row), queries contiguous.
    query_offsets : array (n_queries + 1,)
        Rows ``query_offsets[q]:query_offsets[q+1]`` are the candidates of query q (as
        :attr:`RankingDataset.query_offsets`).
    temperature : float >= 0
        Plackett–Luce logits are ``scores / temperature``; 0 is the deterministic ranking.
    top_k : int or None
        Documents shown per page; ``None``: the whole list.

    Build one from a fitted ranker with :meth:`from_ranker`.
    """

    def __init__(self, scores, query_offsets, *, temperature: float = 1.0, top_k: int | None = 10):
        s = np.asarray(scores, dtype=np.float64)
        off = np.asarray(query_offsets)
        if s.ndim != 1:
            raise InputError(f"scores must be 1-d (one per candidate); got shape {s.shape}")
        if not np.all(np.isfinite(s)):
            i = int(np.flatnonzero(~np.isfinite(s))[0])
            raise InputError(f"scores must be finite; row {i} has {s[i]!r}")
        if (off.ndim != 1 or len(off) < 2 or not np.issubdtype(off.dtype, np.integer) or off[0] != 0
                or off[-1] != len(s) or np.any(np.diff(off) < 1)):
            raise InputError(f"query_offsets must be integers from 0 to the number of scores ({len(s)}), growing by "
                             "at least 1 per query")
        t = temperature
        check_params("PlackettLucePolicy", {"temperature": t}, {"temperature": [Interval("real", 0, None)]})
        self.scores = s
        self.query_offsets = off.astype(np.int64)
        self.temperature = float(t)
        self.top_k = check_k(top_k, "top_k", whole=None)
        self._marginals = None
        self.marginal_error_ = None

    @classmethod
    def from_ranker(cls, ranker, data, *, temperature: float = 1.0, top_k: int | None = 10) -> "PlackettLucePolicy":
        """The policy of a fitted ``ranker`` over the queries of ``data`` (a RankingDataset)."""
        from rankwise.data import RankingDataset

        if not isinstance(data, RankingDataset):
            raise InputError(f"data must be a RankingDataset; got {type(data).__name__}")
        qid = np.repeat(np.arange(data.n_queries), np.diff(data.query_offsets))
        scores = np.asarray(ranker.predict(data.X, qid=qid), dtype=np.float64)
        return cls(scores, data.query_offsets, temperature=temperature, top_k=top_k)

    # -- shape ----------------------------------------------------------------------------------
    @property
    def n_queries(self) -> int:
        return len(self.query_offsets) - 1

    @property
    def n_rows(self) -> int:
        return len(self.scores)

    @property
    def page_sizes(self) -> np.ndarray:
        """Documents shown per page of every query: min(top_k, candidates)."""
        n = np.diff(self.query_offsets)
        return n if self.top_k is None else np.minimum(n, self.top_k)

    @property
    def n_ranks(self) -> int:
        """Columns of :meth:`rank_marginals`: the longest page."""
        return int(self.page_sizes.max())

    def __repr__(self) -> str:
        return (f"PlackettLucePolicy({self.n_queries} queries, {self.n_rows} candidates, "
                f"temperature={self.temperature:g}, top_k={self.top_k})")

    # -- sampling -------------------------------------------------------------------------------
    def sample(self, query, random_state=None):
        """Draw one page per session.

        ``query``: the query index (0..n_queries-1) of every session. Returns ``(session_offsets, rows)``:
        the page of session s is ``rows[session_offsets[s]:session_offsets[s+1]]`` (row numbers of the
        candidates, rank 1 first). Exact Plackett–Luce draws by the Gumbel-max trick, vectorised over the
        sessions of each query; the draws go query by query (reproducible from ``random_state``)."""
        query = np.asarray(query)
        if query.ndim != 1 or (len(query) and (not np.issubdtype(query.dtype, np.integer) or query.min() < 0
                                               or query.max() >= self.n_queries)):
            raise InputError(f"query must be a 1-d array of query indices in [0, {self.n_queries})")
        rng = np.random.default_rng(random_state)
        sizes = self.page_sizes[query]
        s_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        rows = np.empty(s_off[-1], dtype=np.int64)
        order = np.argsort(query, kind="stable")
        bounds = np.searchsorted(query[order], np.arange(self.n_queries + 1))
        for q in np.flatnonzero(np.diff(bounds)):
            sess = order[bounds[q]:bounds[q + 1]]
            a, b = self.query_offsets[q], self.query_offsets[q + 1]
            k = int(self.page_sizes[q])
            if self.temperature == 0:
                page = np.broadcast_to(np.argsort(-self.scores[a:b], kind="stable")[:k], (len(sess), k))
            else:
                keys = self.scores[a:b] / self.temperature + rng.gumbel(size=(len(sess), b - a))
                page = np.argsort(-keys, axis=1, kind="stable")[:, :k]
            idx = s_off[sess][:, None] + np.arange(k)
            rows[idx] = a + page
        return s_off, rows

    # -- marginals ------------------------------------------------------------------------------
    def rank_marginals(self, *, method: str = "exact", n_samples: int = 10_000, random_state=0,
                       return_std_error: bool = False):
        r""":math:`P_\pi(\mathrm{rank}(d) = k \mid q)` for every row d and k = 1..:attr:`n_ranks`, an array
        (n_rows, n_ranks) (0 past a query's page).

        ``method="exact"``: the integral of the module docstring (cached; ``marginal_error_`` is the largest
        deviation of a column sum from 1, of the order of rounding). ``method="mc"``: the share of
        ``n_samples`` sampled rankings per query; with ``return_std_error=True`` also the standard error
        :math:`\sqrt{\hat p(1-\hat p)/n}` of every entry (``(P, se)``).
        """
        if method not in ("exact", "mc"):
            raise InputError(f"method must be 'exact' or 'mc'; got {method!r}")
        if method == "mc":
            check_positive_int(n_samples, "n_samples")
            P = self._mc_marginals(int(n_samples), random_state)
            if return_std_error:
                return P, np.sqrt(P * (1 - P) / int(n_samples))
            return P
        if self._marginals is None:
            self._marginals = self._exact_marginals()
        if return_std_error:
            return self._marginals.copy(), np.zeros_like(self._marginals)
        return self._marginals.copy()

    def _mc_marginals(self, n_samples, random_state):
        P = np.zeros((self.n_rows, self.n_ranks))
        nq = self.n_queries
        for start in range(0, n_samples, 1000):
            m = min(1000, n_samples - start)
            off, rows = self.sample(np.repeat(np.arange(nq), m), random_state=None if random_state is None
                                    else np.random.SeedSequence([int(random_state), start]))
            rank = np.arange(len(rows)) - np.repeat(off[:-1], np.diff(off))
            np.add.at(P, (rows, rank), 1.0)
        return P / n_samples

    def _exact_marginals(self):
        P = np.zeros((self.n_rows, self.n_ranks))
        worst = 0.0
        for q in range(self.n_queries):
            a, b = self.query_offsets[q], self.query_offsets[q + 1]
            k = int(self.page_sizes[q])
            if self.temperature == 0 or b - a == 1:
                order = np.argsort(-self.scores[a:b], kind="stable")[:k]
                P[a + order, np.arange(k)] = 1.0
                continue
            block = _pl_marginals(self.scores[a:b] / self.temperature, k)
            worst = max(worst, float(np.abs(block.sum(axis=0) - 1.0).max()))
            P[a:b, :k] = block
        if worst > 1e-6:  # the quadrature failed: never hand out wrong propensities
            raise RuntimeError(f"Plackett-Luce rank marginals: a column sums to 1 +- {worst:.2e}; please report")
        self.marginal_error_ = worst
        return P


def _pl_marginals(logits, k):
    r"""(n, k) rank marginals of one Plackett–Luce list: :math:`\int \lambda_d e^{-\lambda_d}
    \Pr[\sum_{i\ne d} B_i = j]\, dx` on the log-time grid (module docstring)."""
    lg = np.asarray(logits, dtype=np.float64)
    n = len(lg)
    lo = np.ceil((-lg + _WINDOW[0]) / _GRID_STEP).astype(np.int64)
    hi = np.floor((-lg + _WINDOW[1]) / _GRID_STEP).astype(np.int64)
    nodes = np.unique(np.concatenate([np.arange(u, v + 1) for u, v in zip(lo, hi)])) * _GRID_STEP
    out = np.zeros((n, k))
    chunk = max(1, _MAX_BLOCK // ((n + 1) * k))
    for c in range(0, len(nodes), chunk):
        x = nodes[c:c + chunk]
        z = np.minimum(lg[None, :] + x[:, None], 700.0)  # log(w_i t), (M, n)
        lam = np.exp(z)
        qv = np.exp(-lam)  # P(clock i has not rung by t)
        pv = -np.expm1(-lam)
        M = len(x)
        pre = np.zeros((n + 1, M, k))
        suf = np.zeros((n + 1, M, k))
        pre[0, :, 0] = 1.0
        suf[n, :, 0] = 1.0
        for i in range(n):
            pre[i + 1] = pre[i] * qv[:, i, None]
            pre[i + 1, :, 1:] += pre[i, :, :-1] * pv[:, i, None]
            j = n - 1 - i
            suf[j] = suf[j + 1] * qv[:, j, None]
            suf[j, :, 1:] += suf[j + 1, :, :-1] * pv[:, j, None]
        # Poisson-binomial of the others, candidate d excluded: prefix (0..d-1) * suffix (d+1..n-1)
        excl = np.zeros((n, M, k))
        for u in range(k):
            excl[:, :, u:] += pre[:n, :, u, None] * suf[1:, :, : k - u]
        dens = lam * qv * _GRID_STEP  # λ_d e^{-λ_d} dx, (M, n)
        out += np.einsum("mn,nmk->nk", dens, excl)
    return out


class PolicyMixture(_Exposing):
    r"""Several logging policies over the same rows, each logging a share of the sessions (intervention
    harvesting with several production rankers, Agarwal et al., WSDM 2019): the rank marginals are the
    share-weighted average, :math:`P(\mathrm{rank}=k) = \sum_l w_l P_l(\mathrm{rank}=k)`."""

    def __init__(self, policies, weights=None):
        policies = list(policies)
        if not policies or not all(isinstance(p, PlackettLucePolicy) for p in policies):
            raise InputError("policies must be a non-empty sequence of PlackettLucePolicy")
        n = policies[0].n_rows
        if any(p.n_rows != n or not np.array_equal(p.query_offsets, policies[0].query_offsets) for p in policies):
            raise InputError("the policies of a mixture must rank the same rows (same query_offsets)")
        w = np.full(len(policies), 1.0 / len(policies)) if weights is None else np.asarray(weights, dtype=np.float64)
        if w.shape != (len(policies),) or not np.all(np.isfinite(w)) or np.any(w < 0) or abs(w.sum() - 1) > 1e-9:
            raise InputError(f"weights must be {len(policies)} non-negative shares summing to 1; got {weights!r}")
        self.policies = policies
        self.weights = w
        self.query_offsets = policies[0].query_offsets

    @property
    def n_rows(self) -> int:
        return self.policies[0].n_rows

    @property
    def n_queries(self) -> int:
        return self.policies[0].n_queries

    @property
    def n_ranks(self) -> int:
        return max(p.n_ranks for p in self.policies)

    def __repr__(self) -> str:
        return f"PolicyMixture({len(self.policies)} policies, weights={np.round(self.weights, 4).tolist()})"

    def rank_marginals(self, **kw):
        """The share-weighted rank marginals (keywords as :meth:`PlackettLucePolicy.rank_marginals`)."""
        R = self.n_ranks
        se = kw.get("return_std_error", False)
        P = np.zeros((self.n_rows, R))
        var = np.zeros((self.n_rows, R))
        for w, p in zip(self.weights, self.policies):
            got = p.rank_marginals(**kw)
            m, s = got if se else (got, None)
            P[:, : m.shape[1]] += w * m
            if se:
                var[:, : m.shape[1]] += (w * s) ** 2
        return (P, np.sqrt(var)) if se else P


@dataclass
class PolicyPropensity:
    r"""Policy-aware propensities (Oosterhuis & de Rijke, SIGIR 2020) for a click data set's candidates.

    ``exposure``: :math:`\rho_{qd}` of every row of the features data set the policy ranks;
    ``theta``: the examination per rank it was computed with; ``policy``: the logging policy. Pass it
    as the ``propensity`` of :func:`~rankwise.clicks.click_dataset` / :func:`~rankwise.clicks.fit_debiased`
    to get the policy-aware labels. Made by :meth:`PlackettLucePolicy.propensities`."""

    exposure: np.ndarray
    theta: np.ndarray
    policy: object = None

    def __post_init__(self):
        self.exposure = np.asarray(self.exposure, dtype=np.float64)
        self.theta = np.asarray(self.theta, dtype=np.float64)
        if self.exposure.ndim != 1 or not np.all(np.isfinite(self.exposure)) or np.any(self.exposure < 0):
            raise InputError("exposure must be a 1-d array of finite values >= 0 (one per candidate row)")
