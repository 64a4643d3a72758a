"""Naive reference for the data layer: a line-by-line SVMlight/LETOR parser written straight from
the format description (``label qid:Q i:v ... #comment``), and a naive padding.

Slow and simple on purpose; the fast parser and views are compared with these.
"""
from __future__ import annotations

import gzip

import numpy as np


def parse_svmlight_naive(path, *, zero_based=False):
    """Return (rows, labels, qids, doc_ids) with rows as dicts {column: float32 value}."""
    raw = open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    rows, labels, qids, docs = [], [], [], []
    for line in raw.decode("utf-8").split("\n"):
        data, _, comment = line.partition("#")
        toks = data.split()
        if not toks:
            continue
        labels.append(float(toks[0]))
        rest = toks[1:]
        q = None
        if rest and rest[0].startswith("qid:"):
            q = int(rest[0][4:])
            rest = rest[1:]
        qids.append(q)
        row = {}
        for t in rest:
            i, v = t.split(":")
            col = int(i) - (0 if zero_based else 1)
            row[col] = np.float32(float("nan") if v == "NULL" else float(v))
        rows.append(row)
        doc = None
        ctoks = comment.replace("=", " = ").split()
        if "docid" in ctoks:
            k = ctoks.index("docid")
            if k + 2 < len(ctoks) and ctoks[k + 1] == "=":
                doc = ctoks[k + 2]
        docs.append(doc)
    return rows, labels, qids, docs


def dense_from_rows(rows, n_features):
    X = np.zeros((len(rows), n_features), dtype=np.float32)
    for r, row in enumerate(rows):
        for c, v in row.items():
            X[r, c] = v
    return X


def padded_naive(values, offsets, pad_value=0):
    """Loop-built [n_queries, max_len] padding and mask."""
    sizes = [offsets[i + 1] - offsets[i] for i in range(len(offsets) - 1)]
    L = max(sizes)
    out = np.full((len(sizes), L), pad_value, dtype=np.asarray(values).dtype)
    where = np.zeros((len(sizes), L), dtype=bool)
    for i in range(len(sizes)):
        for j in range(sizes[i]):
            out[i, j] = values[offsets[i] + j]
            where[i, j] = True
    return out, where
