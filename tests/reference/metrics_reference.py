"""Naive reference implementations of the ranking measures, written straight from the formulas.

Each measure takes the labels of ONE query in ranked order (best first) and returns the value,
or None when the query is "empty" (the measure is undefined). Ties are handled outside:
``ranked_orders`` lists every ranking the tie rule allows (one for deterministic rules, all
permutations inside tie groups for "average"), and ``reference`` averages over them.
Deliberately slow and simple; no numpy tricks.
"""
from __future__ import annotations

import itertools
import math


def gain(y, kind="exp2"):
    if kind == "exp2":
        return 2.0 ** y - 1.0
    if kind == "linear":
        return float(y)
    return float(kind[int(y)])  # table


def disc(i, kind="log2"):  # i is the 1-based position
    if kind == "log2":
        return 1.0 / math.log2(i + 1)
    return 1.0 if i <= 2 else 1.0 / math.log2(i)  # jarvelin


def dcg(ranked, k=None, gain_kind="exp2", discount="log2"):
    n = len(ranked) if k is None else min(k, len(ranked))
    return sum(gain(ranked[i], gain_kind) * disc(i + 1, discount) for i in range(n))


def dcg_query(ranked, k=None, gain_kind="exp2", discount="log2"):
    """DCG of a query; None (empty) when no item has a positive gain."""
    if all(gain(y, gain_kind) == 0 for y in ranked):
        return None
    return dcg(ranked, k, gain_kind, discount)


def ndcg(ranked, k=None, gain_kind="exp2", discount="log2", short_list="truncate"):
    ideal = dcg(sorted(ranked, reverse=True), k, gain_kind, discount)
    if ideal == 0:
        return None
    if short_list == "zero" and k is not None and len(ranked) < k:
        return 0.0
    return dcg(ranked, k, gain_kind, discount) / ideal


def err(ranked, k=None, ymax=None):
    if not any(y > 0 for y in ranked):
        return None
    ymax = max(ranked) if ymax is None else ymax
    n = len(ranked) if k is None else min(k, len(ranked))
    total, p_reach = 0.0, 1.0
    for r in range(1, n + 1):
        R = (2.0 ** ranked[r - 1] - 1) / 2.0 ** ymax
        total += p_reach * R / r
        p_reach *= 1 - R
    return total


def average_precision(ranked, k=None, thr=1, denominator="relevant"):
    rel = [1 if y >= thr else 0 for y in ranked]
    R = sum(rel)
    if R == 0:
        return None
    n = len(ranked) if k is None else min(k, len(ranked))
    s = 0.0
    for i in range(1, n + 1):
        if rel[i - 1]:
            s += sum(rel[:i]) / i
    d = R if (denominator == "relevant" or k is None) else min(R, k)
    return s / d


def precision(ranked, k=None, thr=1):
    rel = [1 if y >= thr else 0 for y in ranked]
    if sum(rel) == 0:
        return None
    if k is None:
        return sum(rel) / len(rel)
    return sum(rel[:k]) / k


def recall(ranked, k=None, thr=1):
    rel = [1 if y >= thr else 0 for y in ranked]
    if sum(rel) == 0:
        return None
    n = len(ranked) if k is None else k
    return sum(rel[:n]) / sum(rel)


def reciprocal_rank(ranked, k=None, thr=1):
    rel = [1 if y >= thr else 0 for y in ranked]
    if sum(rel) == 0:
        return None
    n = len(ranked) if k is None else min(k, len(ranked))
    for i in range(1, n + 1):
        if rel[i - 1]:
            return 1.0 / i
    return 0.0


def auc(ranked, thr=1):
    pos = [i for i, y in enumerate(ranked) if y >= thr]
    neg = [i for i, y in enumerate(ranked) if y < thr]
    if not pos or not neg:
        return None
    return sum(1 for u in pos for v in neg if u < v) / (len(pos) * len(neg))


def kendall_tau(ranked):
    n = len(ranked)
    C = D = T = 0
    for i in range(n):
        for j in range(i + 1, n):  # i is ranked above j
            if ranked[i] > ranked[j]:
                C += 1
            elif ranked[i] < ranked[j]:
                D += 1
            else:
                T += 1
    n0 = n * (n - 1) / 2
    if n0 - T == 0:
        return None
    return (C - D) / math.sqrt(n0 * (n0 - T))


def spearman(ranked):
    n = len(ranked)
    if len(set(ranked)) < 2:
        return None
    r = [n - i for i in range(n)]  # score rank, n = best
    srt = sorted(ranked)
    lr = []
    for y in ranked:  # average rank of the label, 1 = lowest
        first = srt.index(y) + 1
        last = n - srt[::-1].index(y)
        lr.append((first + last) / 2)
    mr, ml = sum(r) / n, sum(lr) / n
    num = sum((a - mr) * (b - ml) for a, b in zip(r, lr))
    den = math.sqrt(sum((a - mr) ** 2 for a in r) * sum((b - ml) ** 2 for b in lr))
    return num / den


def pairwise_accuracy(ranked):
    good = total = 0
    for i in range(len(ranked)):
        for j in range(len(ranked)):
            if ranked[i] > ranked[j]:
                total += 1
                good += i < j
    return None if total == 0 else good / total


def ideal_position(ranked, u):
    """1-based position of item u in the ideal order (labels descending); equal labels share the
    mean of the positions they occupy together."""
    greater = sum(1 for y in ranked if y > ranked[u])
    equal = sum(1 for y in ranked if y == ranked[u])
    positions = range(greater + 1, greater + equal + 1)
    return sum(positions) / equal


def pairwise_cost(ranked, omega=None):
    """sum_{u != v} [sigma_u < sigma_v][hat sigma_v < hat sigma_u] omega(sigma_u, sigma_v)."""
    cost, any_pair = 0.0, False
    for u in range(len(ranked)):
        for v in range(len(ranked)):
            if ranked[u] > ranked[v]:  # u should precede v
                any_pair = True
                if v < u:  # v predicted above u
                    cost += 1.0 if omega is None else omega(ideal_position(ranked, u), ideal_position(ranked, v))
    return cost if any_pair else None


# --------------------------------------------------------------------------- tie rules

def ranked_orders(scores, labels, ties, doc_ids=None):
    """Every ranking (list of item indices, best first) the tie rule allows, with python sorts."""
    idx = list(range(len(scores)))
    if ties == "input":
        return [sorted(idx, key=lambda i: -scores[i])]  # python sort is stable
    if ties == "pessimistic":
        return [sorted(idx, key=lambda i: (-scores[i], labels[i]))]
    if ties == "optimistic":
        return [sorted(idx, key=lambda i: (-scores[i], -labels[i]))]
    if ties == "docid":
        by_doc = sorted(idx, key=lambda i: str(doc_ids[i]), reverse=True)
        return [sorted(by_doc, key=lambda i: -scores[i])]
    assert ties == "average"
    groups = {}
    for i in idx:
        groups.setdefault(scores[i], []).append(i)
    ordered = [groups[s] for s in sorted(groups, reverse=True)]
    out = []
    for combo in itertools.product(*[list(itertools.permutations(g)) for g in ordered]):
        out.append([i for g in combo for i in g])
    return out


def reference(measure, scores, labels, ties="average", doc_ids=None, **kw):
    """Mean of ``measure`` over the rankings allowed by ``ties`` (None if the query is empty)."""
    vals = []
    for order in ranked_orders(scores, labels, ties, doc_ids):
        v = measure([labels[i] for i in order], **kw)
        if v is None:
            return None
        vals.append(v)
    return sum(vals) / len(vals)


def pair_counts_quadratic(ranked_labels, group_ids, rel_thr=float("inf")):
    """The O(n^2) definition of the pair counts of one sorted query, straight from the pairs.

    ``ranked_labels`` in ranking order, ``group_ids`` the tie group of each position. Returns
    (concordant, discordant, distinct-label pairs, equal-label pairs, relevant-above-irrelevant,
    n_rel * n_irrel); a pair inside a tie group counts 1/2 each way.
    """
    y = list(ranked_labels)
    g = list(group_ids)
    n = len(y)
    C = D = T = A = 0.0
    nr = sum(1 for v in y if v >= rel_thr)
    for u in range(n):
        for v in range(u + 1, n):
            if y[u] == y[v]:
                T += 1
                continue
            w = 0.5 if g[u] == g[v] else 1.0
            if y[u] > y[v]:
                C, D = C + w, D + 1 - w
            else:
                C, D = C + 1 - w, D + w
            ru, rv = y[u] >= rel_thr, y[v] >= rel_thr
            if ru and not rv:
                A += w
            elif rv and not ru:
                A += 1 - w
    return C, D, n * (n - 1) / 2 - T, T, A, nr * (n - nr)
