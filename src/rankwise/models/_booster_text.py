"""Validation of GBDT booster text (LightGBM model text, XGBoost JSON) before the library sees it.

LightGBM's and XGBoost's model parsers trust their input: a model string with a child index out
of range, a cycle in a tree, a ``tree_sizes`` entry that disagrees with the text, or a split on
a feature beyond the model's width makes them abort, segfault or loop forever (issue 17 found 37
such files in 1,002 corrupted ones). The checks here are written in Python, from the formats as
the libraries write them, and refuse anything that is not a well-formed single-output tree
ensemble of the kind rankwise trains:

- **structure**: known sections and keys only, in the order the library writes them; trees
  numbered ``0..n-1``; LightGBM's ``tree_sizes`` equal to the byte length of each tree block;
  XGBoost's ``num_trees``, ``iteration_indptr`` and ``tree_info`` consistent with the trees;
- **counts**: every per-node array of a tree has exactly the length its node count implies;
- **trees**: every child index in range, each node reached exactly once from the root (so no
  cycle, no shared or orphan node), parent links consistent (XGBoost);
- **numbers**: integers in the plain ASCII form and in range, split features inside the model's
  width (equal to ``n_features``), leaf values and weights finite; thresholds finite, except
  LightGBM's ``inf`` on a numerical split (the upper bound of its last bin before the missing-value
  bin: "every value left, NaN right");
- **categorical splits** (LightGBM ``categorical_feature``, XGBoost categorical ``feature_types``):
  LightGBM's ``cat_boundaries`` from 0, increasing, ending at the length of ``cat_threshold``,
  each categorical node's threshold an index ``0..num_cat-1`` used once; XGBoost's category lists
  consistent with the nodes whose ``split_type`` is 1, categories in ``[0, 2**24]``;
- **linear trees** (LightGBM ``linear_tree``): ``leaf_const``, ``num_features`` and the
  per-leaf ``leaf_features`` / ``leaf_coeff`` lists laid out exactly as LightGBM writes them,
  features inside the model's width, coefficients finite;
- no multi-output models or forests (rankwise predicts one score per row).

A file that passes is handed to the library unchanged (XGBoost: duplicate JSON keys are refused,
so that what was checked is what the library reads). The functions raise :class:`ValueError`
with the part of the text that is wrong (``booster text, line 17 (Tree=0): ...``); the
persistence layer turns that into an ``InputError`` naming the file.
"""
from __future__ import annotations

import json
import math
import re

import numpy as np

__all__ = ["check_lightgbm_text", "check_xgboost_json", "check_booster_text"]

_INT_RE = re.compile(r"-?[0-9]+\Z")
_FLOAT_RE = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\Z")
_INT_LINE_RE = re.compile(r"-?[0-9]{1,10}(?: -?[0-9]{1,10})*\Z")
_FLOAT_LINE_RE = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]{1,4})?"
                            r"(?: [-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]{1,4})?)*\Z")
#: LightGBM's thresholds: numbers, or ``inf`` (checked per node: numerical splits only)
_THRESHOLD_TOKEN = r"(?:[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]{1,4})?|inf)"
_THRESHOLD_LINE_RE = re.compile(_THRESHOLD_TOKEN + "(?: " + _THRESHOLD_TOKEN + r")*\Z")
_THRESHOLD_RE = re.compile(_THRESHOLD_TOKEN + r"\Z")
_INT32 = 2**31 - 1
#: a model wider than this is not something rankwise trains; it bounds what a crafted file can ask for
MAX_FEATURES = 2**31 - 2


class BoosterTextError(ValueError):
    """Malformed booster text (the persistence layer reports it as a corrupt model file)."""


def _fail(where: str, what: str):
    raise BoosterTextError(f"booster text, {where}: {what}")


# ------------------------------------------------------------------------------------ LightGBM
_LGB_HEADER_KEYS = ("version", "num_class", "num_tree_per_iteration", "label_index", "max_feature_idx",
                    "objective", "average_output", "feature_names", "feature_infos", "monotone_constraints",
                    "tree_sizes")
_LGB_TREE_KEYS = ("num_leaves", "num_cat", "split_feature", "split_gain", "threshold", "decision_type",
                  "left_child", "right_child", "leaf_value", "leaf_weight", "leaf_count", "internal_value",
                  "internal_weight", "internal_count", "is_linear", "shrinkage")
_LGB_CAT_KEYS = ("cat_boundaries", "cat_threshold")  # with num_cat > 0
_LGB_LINEAR_KEYS = ("leaf_const", "num_features", "leaf_features", "leaf_coeff")  # with is_linear=1
_OBJECTIVE_RE = re.compile(r"[a-z_]+(?: [a-z_]+:[-+.0-9eE]+)*\Z")
# numerical: [min:max] or none (a feature without a split); categorical: its categories, "-1:7:0:3"
_FEATURE_INFO_RE = re.compile(r"none\Z|\[[-+.0-9eE]+:[-+.0-9eE]+\]\Z|-?[0-9]{1,10}(?::-?[0-9]{1,10})*\Z")
# what LightGBM holds in a feature name: no whitespace or control characters, none of its JSON specials
_FEATURE_NAME_RE = re.compile(r'[^\x00-\x20\x7f",:\[\]{}]+\Z')
_PARAM_RE = re.compile(r"\[[a-z0-9_]+: [\x20-\x7e]*\]\Z")
_IMPORTANCE_RE = re.compile(r'[^\x00-\x20\x7f",:\[\]{}]+=[0-9]+\Z')
#: largest category XGBoost takes (categories are exact in float32)
_MAX_CATEGORY = 1 << 24


def _int(tok: str, where: str, lo: int = -_INT32 - 1, hi: int = _INT32) -> int:
    if not _INT_RE.match(tok):
        _fail(where, f"{tok[:40]!r} is not an integer")
    v = int(tok)
    if not lo <= v <= hi:
        _fail(where, f"{v} is out of range [{lo}, {hi}]")
    return v


def _float(tok: str, where: str) -> float:
    if not _FLOAT_RE.match(tok):
        _fail(where, f"{tok[:40]!r} is not a finite decimal number")
    v = float(tok)
    if not math.isfinite(v):
        _fail(where, f"{tok[:40]!r} is not finite")
    return v


def _check_tree_links(left: list, right: list, n_leaves: int, where: str) -> None:
    """LightGBM: internal nodes 0..L-2, children >= 0 are internal nodes, ~c are leaves; every
    node and leaf must be reached exactly once from the root."""
    n_int = n_leaves - 1
    seen_int = [False] * n_int
    seen_leaf = [False] * n_leaves
    stack = [0]
    seen_int[0] = True
    while stack:
        node = stack.pop()
        for c in (left[node], right[node]):
            if c >= 0:
                if c >= n_int:
                    _fail(where, f"node {node} has child {c}, but the tree has only {n_int} internal nodes")
                if seen_int[c]:
                    _fail(where, f"internal node {c} is reached twice (a cycle or a shared node)")
                seen_int[c] = True
                stack.append(c)
            else:
                leaf = ~c
                if leaf >= n_leaves:
                    _fail(where, f"node {node} points to leaf {leaf}, but the tree has {n_leaves} leaves")
                if seen_leaf[leaf]:
                    _fail(where, f"leaf {leaf} is reached twice")
                seen_leaf[leaf] = True
    if not all(seen_int) or not all(seen_leaf):
        _fail(where, "some nodes or leaves are not reachable from the root")


def _lgb_tree(block: list[tuple[int, str]], k: int, n_features: int) -> None:
    where0 = f"line {block[0][0]} (Tree={k})"
    kv: dict[str, tuple[int, str]] = {}
    known = _LGB_TREE_KEYS + _LGB_CAT_KEYS + _LGB_LINEAR_KEYS
    for lineno, line in block[1:]:
        if not line:
            continue
        key, eq, val = line.partition("=")
        if not eq or key not in known:
            _fail(f"line {lineno} (Tree={k})", f"unexpected line {line[:60]!r}; expected one of "
                                                f"{', '.join(known)} as key=value")
        if key in kv:
            _fail(f"line {lineno} (Tree={k})", f"{key} given twice")
        kv[key] = (lineno, val)
    missing = [key for key in _LGB_TREE_KEYS if key not in kv]
    if missing:
        _fail(where0, f"missing {', '.join(missing)}")

    def at(key):
        return f"line {kv[key][0]} (Tree={k}, {key})"

    n_leaves = _int(kv["num_leaves"][1], at("num_leaves"), 1, 1 << 24)
    n_int = n_leaves - 1
    n_cat = _int(kv["num_cat"][1], at("num_cat"), 0, n_int)
    linear = _int(kv["is_linear"][1], at("is_linear"), 0, 1) == 1
    for keys, present, why in ((_LGB_CAT_KEYS, n_cat > 0, "num_cat > 0"), (_LGB_LINEAR_KEYS, linear, "is_linear=1")):
        for key in keys:
            if (key in kv) != present:
                _fail(where0, f"{key} {'missing' if present else 'given'}, but it comes with {why} only")
    _float(kv["shrinkage"][1], at("shrinkage"))

    def arr(key, n, kind, lo=None, hi=None, allow_empty=False):
        """One space-separated array line, checked whole (regex) and converted by numpy."""
        val = kv[key][1]
        count = val.count(" ") + 1 if val else 0
        if count != n and not (allow_empty and count == 0):
            _fail(at(key), f"{count} values, expected {n} (num_leaves={n_leaves})")
        return _numbers(val, count, kind, at(key), lo, hi)

    arr("split_feature", n_int, "int", 0, n_features - 1)
    arr("split_gain", n_int, "float")
    thresholds = arr("threshold", n_int, "threshold")
    dts = arr("decision_type", n_int, "int", 0, 15)
    if np.any((dts >> 2) & 3 == 3):
        _fail(at("decision_type"), "a decision type has an unknown missing-value rule")
    categorical = (dts & 1) == 1
    if n_cat:
        # categorical node i splits on the bitset cat_threshold[cat_boundaries[t]:cat_boundaries[t+1]],
        # t = its threshold: the indices 0..num_cat-1, one per categorical node
        cat_t = thresholds[categorical]
        if len(cat_t) != n_cat or not np.array_equal(np.sort(cat_t), np.arange(n_cat)):
            _fail(at("threshold"), f"the categorical nodes' thresholds must be the indices 0..{n_cat - 1}, "
                                   "one per categorical node")
        bounds = arr("cat_boundaries", n_cat + 1, "int", 0, 1 << 24)
        if bounds[0] != 0 or np.any(np.diff(bounds) <= 0):
            _fail(at("cat_boundaries"), "expected 0 first, then increasing values")
        arr("cat_threshold", int(bounds[-1]), "int", 0, 2**32 - 1)
    elif np.any(categorical):
        _fail(at("decision_type"), "a categorical split in a tree with num_cat=0")
    left = arr("left_child", n_int, "int", -n_leaves, n_int - 1).tolist()
    right = arr("right_child", n_int, "int", -n_leaves, n_int - 1).tolist()
    arr("leaf_value", n_leaves, "float")
    arr("leaf_weight", n_leaves, "float", allow_empty=n_leaves == 1)
    arr("leaf_count", n_leaves, "int", 0, _INT32)
    arr("internal_value", n_int, "float")
    arr("internal_weight", n_int, "float")
    arr("internal_count", n_int, "int", 0, _INT32)
    if linear:
        arr("leaf_const", n_leaves, "float")
        sizes = arr("num_features", n_leaves, "int", 0, n_features).tolist()
        _lgb_leaf_lists(kv["leaf_features"][1], sizes, "int", at("leaf_features"), n_features)
        _lgb_leaf_lists(kv["leaf_coeff"][1], sizes, "float", at("leaf_coeff"), n_features)
    if n_int:
        _check_tree_links(left, right, n_leaves, f"line {kv['left_child'][0]} (Tree={k})")


def _numbers(val: str, count: int, kind: str, where: str, lo=None, hi=None) -> np.ndarray:
    """``count`` space-separated integers in [lo, hi], finite floats, or thresholds (finite or ``inf``)."""
    if count == 0:
        return np.zeros(0, dtype=np.int64 if kind == "int" else np.float64)
    line_re, tok_re, what = {"int": (_INT_LINE_RE, _INT_RE, "an integer"),
                             "float": (_FLOAT_LINE_RE, _FLOAT_RE, "a finite decimal number"),
                             "threshold": (_THRESHOLD_LINE_RE, _THRESHOLD_RE, "a threshold (a number or inf)")}[kind]
    if not line_re.match(val):
        bad = next((t for t in val.split(" ") if not tok_re.match(t)), val)
        _fail(where, f"{bad[:40]!r} is not {what}")
    if kind == "int":
        a = np.array(val.split(" "), dtype=np.int64)
        if (lo is not None and a.min() < lo) or (hi is not None and a.max() > hi):
            v = int(a[(a < lo) | (a > hi)][0]) if lo is not None and hi is not None else int(a.min())
            _fail(where, f"{v} is out of range [{lo}, {hi}]")
        return a
    with np.errstate(over="ignore"):
        a = np.array(val.split(" "), dtype=np.float64)
    bad = ~np.isfinite(a)
    if kind == "threshold":  # the token 'inf' itself is allowed, a finite-looking number that overflows is not
        bad &= np.array([t != "inf" for t in val.split(" ")]) if bad.any() else bad
    if np.any(bad):
        _fail(where, "a value is not finite")
    return a


def _lgb_leaf_lists(val: str, sizes: list, kind: str, where: str, n_features: int) -> None:
    """A linear tree's ``leaf_features`` / ``leaf_coeff`` line: for each leaf, its ``sizes[i]`` values
    followed by a space when there are any, then one more space (LightGBM's layout, to the byte)."""
    toks = val.split(" ")
    flat = [t for t in toks if t]
    if len(flat) != sum(sizes):
        _fail(where, f"{len(flat)} values, expected {sum(sizes)} (the sum of num_features)")
    pos, parts = 0, []
    for n in sizes:
        parts.append(" ".join(flat[pos:pos + n]) + " " if n else "")
        parts.append(" ")
        pos += n
    if "".join(parts) != val:
        _fail(where, "the per-leaf lists are not laid out as LightGBM writes them")
    if flat:
        _numbers(" ".join(flat), len(flat), kind, where, 0, n_features - 1)


def check_lightgbm_text(text: str, *, n_features: int | None = None) -> None:
    """Raise ValueError unless ``text`` is a well-formed LightGBM model of single-output trees."""
    if not isinstance(text, str):
        raise BoosterTextError("booster text: not a string")
    if "\r" in text or "\x00" in text:
        _fail("header", "carriage return or NUL byte in the model text")
    end = text.find("\nend of trees\n")
    if end < 0:
        _fail("end", "no 'end of trees' line (the text is truncated)")
    head_and_trees, tail = text[: end + 1], text[end + 1:]
    lines = head_and_trees.split("\n")
    if lines[0] != "tree":
        _fail("line 1", f"expected 'tree', got {lines[0][:40]!r}")
    header: dict[str, tuple[int, str]] = {}
    i = 1
    while i < len(lines) and lines[i] != "" and not lines[i].startswith("Tree="):
        key, eq, val = lines[i].partition("=")
        if key not in _LGB_HEADER_KEYS or (not eq and key != "average_output"):
            _fail(f"line {i + 1}", f"unexpected header line {lines[i][:60]!r}")
        if key in header:
            _fail(f"line {i + 1}", f"{key} given twice")
        header[key] = (i + 1, val)
        i += 1
    for key in ("version", "num_class", "num_tree_per_iteration", "max_feature_idx", "tree_sizes"):
        if key not in header:
            _fail("header", f"missing {key}")
    if "average_output" in header:
        _fail(f"line {header['average_output'][0]}", "averaged (random forest) output is not written by rankwise")

    def hat(key):
        return f"line {header[key][0]} ({key})"

    if header["version"][1] not in ("v2", "v3", "v4"):
        _fail(hat("version"), f"unknown model version {header['version'][1][:20]!r}")
    if _int(header["num_class"][1], hat("num_class")) != 1 or \
            _int(header["num_tree_per_iteration"][1], hat("num_tree_per_iteration")) != 1:
        _fail("header", "only single-output models (num_class=1, num_tree_per_iteration=1) are written by rankwise")
    if "label_index" in header:
        _int(header["label_index"][1], hat("label_index"), 0)
    width = _int(header["max_feature_idx"][1], hat("max_feature_idx"), 0, MAX_FEATURES - 1) + 1
    if n_features is not None and width != n_features:
        _fail(hat("max_feature_idx"), f"the booster has {width} features but the model file says {n_features}")
    if "objective" in header and not _OBJECTIVE_RE.match(header["objective"][1]):
        _fail(hat("objective"), f"unexpected objective {header['objective'][1][:60]!r}")
    for key, pat in (("feature_names", _FEATURE_NAME_RE), ("feature_infos", _FEATURE_INFO_RE)):
        if key in header:
            toks = header[key][1].split(" ")
            if len(toks) != width:
                _fail(hat(key), f"{len(toks)} entries, expected {width} (max_feature_idx + 1)")
            if not all(pat.match(t) for t in toks):
                _fail(hat(key), "malformed entry")
    if "monotone_constraints" in header:
        toks = header["monotone_constraints"][1].split(" ")
        if len(toks) != width or any(t not in ("-1", "0", "1") for t in toks):
            _fail(hat("monotone_constraints"), f"expected {width} entries of -1, 0 or 1")
    sizes_tok = header["tree_sizes"][1].split(" ") if header["tree_sizes"][1] else []
    sizes = [_int(t, hat("tree_sizes"), 1, len(text)) for t in sizes_tok]
    # tree blocks: from "Tree=k" to the next "Tree=" or "end of trees"; the byte size of each
    # block (as LightGBM counts it for its parallel parser) must equal tree_sizes[k]
    while i < len(lines) and lines[i] == "":
        i += 1
    starts = [j for j in range(i, len(lines)) if lines[j].startswith("Tree=")]
    if i < len(lines) and lines[i] != "" and (not starts or starts[0] != i):
        _fail(f"line {i + 1}", f"unexpected line {lines[i][:60]!r}; expected 'Tree=0'")
    if len(starts) != len(sizes):
        _fail(hat("tree_sizes"), f"{len(sizes)} sizes for {len(starts)} trees")
    if not starts:
        _fail("trees", "the model has no trees")
    starts.append(len(lines) - 1)  # the empty string after the final '\n' before "end of trees"
    for k in range(len(sizes)):
        s, e = starts[k], starts[k + 1]
        if lines[s] != f"Tree={k}":
            _fail(f"line {s + 1}", f"expected 'Tree={k}', got {lines[s][:40]!r}")
        block = lines[s:e]
        nbytes = sum(len(x.encode("utf-8")) + 1 for x in block)
        if nbytes != sizes[k]:
            _fail(f"line {s + 1} (Tree={k})", f"the tree block is {nbytes} bytes but tree_sizes says {sizes[k]}")
        _lgb_tree([(s + 1 + j, x) for j, x in enumerate(block)], k, width)
    # tail, exactly as LightGBM writes it (a truncated parameter section crashes its parser):
    # end of trees / "" / feature_importances: / name=count* / "" / parameters: / [key: value]* /
    # end of parameters / "" / pandas_categorical:<json> / ""
    tail_lines = tail.split("\n")
    fixed = {0: "end of trees", 1: "", 2: "feature_importances:"}
    for j, want in fixed.items():
        if j >= len(tail_lines) or tail_lines[j] != want:
            _fail(f"after 'end of trees', line {j + 1}", f"expected {want!r}")
    j = 3
    while j < len(tail_lines) and _IMPORTANCE_RE.match(tail_lines[j]):
        j += 1
    if tail_lines[j:j + 2] != ["", "parameters:"]:
        _fail(f"after 'end of trees', line {j + 1}", "expected the feature importances, a blank line and 'parameters:'")
    j += 2
    while j < len(tail_lines) and _PARAM_RE.match(tail_lines[j]):
        j += 1
    if tail_lines[j:j + 2] not in (["", "end of parameters"], ["end of parameters", ""]):
        _fail(f"after 'end of trees', line {j + 1}", "expected '[key: value]' parameter lines and 'end of parameters' "
                                                      "(the text is truncated or altered)")
    j += 2
    rest = tail_lines[j:]
    if rest and rest[0] == "":
        rest = rest[1:]
    if len(rest) != 2 or rest[1] != "" or not rest[0].startswith("pandas_categorical:"):
        _fail(f"after 'end of trees', line {j + 1}", "expected one final 'pandas_categorical:' line")
    try:
        json.loads(rest[0][len("pandas_categorical:"):], parse_constant=_no_constant)
    except (ValueError, RecursionError):
        _fail("pandas_categorical", "not valid JSON")


# ------------------------------------------------------------------------------------ XGBoost
def _no_constant(name):
    raise ValueError(f"{name} is not allowed")


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"key {k!r} given twice")
        out[k] = v
    return out


def _xnum(v, where, *, integer=False, lo=None, hi=None):
    if isinstance(v, str):  # XGBoost writes many parameters as strings
        if integer:
            v = _int(v, where)
        else:
            v = _float(v, where)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
        _fail(where, f"expected {'an integer' if integer else 'a number'}, got {str(v)[:40]!r}")
    if not integer and not math.isfinite(v):
        _fail(where, "not finite")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        _fail(where, f"{v} is out of range [{lo}, {hi}]")
    return v


def _xarray(v, where, n, *, integer=False, lo=None, hi=None):
    """A JSON list of ``n`` numbers (integers in [lo, hi], or finite floats), checked by numpy."""
    _list(v, where, n)
    if not n:
        return
    if any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in v):
        _fail(where, "expected numbers only")
    if integer:
        if not all(type(x) is int for x in v):
            _fail(where, "expected integers")
        if max(abs(x) for x in v) > 2**62:
            _fail(where, f"a value is out of range [{lo}, {hi}]")
        a = np.array(v, dtype=np.int64)
        out = (a < lo) | (a > hi)
        if out.any():
            _fail(where, f"{int(a[out][0])} is out of range [{lo}, {hi}]")
        return
    a = np.array(v, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        _fail(where, "a value is not finite")


def _obj(d, where, keys=None, required=()):
    if not isinstance(d, dict):
        _fail(where, f"expected an object, got {type(d).__name__}")
    if keys is not None:
        extra = sorted(set(d) - set(keys))
        if extra:
            _fail(where, f"unexpected key {extra[0]!r}")
    for k in required:
        if k not in d:
            _fail(where, f"missing {k!r}")
    return d


def _list(v, where, n=None):
    if not isinstance(v, list):
        _fail(where, f"expected a list, got {type(v).__name__}")
    if n is not None and len(v) != n:
        _fail(where, f"{len(v)} entries, expected {n}")
    return v


_XGB_TREE_KEYS = ("base_weights", "categories", "categories_nodes", "categories_segments", "categories_sizes",
                  "default_left", "id", "left_children", "loss_changes", "parents", "right_children",
                  "split_conditions", "split_indices", "split_type", "sum_hessian", "tree_param")


def _xgb_tree(t, k, n_features):
    where = f"tree {k}"
    _obj(t, where, _XGB_TREE_KEYS, _XGB_TREE_KEYS)
    tp = _obj(t["tree_param"], f"{where} tree_param", ("num_deleted", "num_feature", "num_nodes", "size_leaf_vector"),
              ("num_feature", "num_nodes"))
    n = _xnum(tp["num_nodes"], f"{where} num_nodes", integer=True, lo=1, hi=1 << 26)
    if _xnum(tp["num_feature"], f"{where} num_feature", integer=True) != n_features:
        _fail(f"{where} num_feature", f"expected {n_features}")
    if _xnum(tp.get("num_deleted", "0"), f"{where} num_deleted", integer=True) != 0:
        _fail(f"{where} num_deleted", "deleted nodes are not written by rankwise")
    if _xnum(tp.get("size_leaf_vector", "1"), f"{where} size_leaf_vector", integer=True) not in (0, 1):
        _fail(f"{where} size_leaf_vector", "multi-output leaves are not written by rankwise")
    if _xnum(t["id"], f"{where} id", integer=True) != k:
        _fail(f"{where} id", f"expected {k}")
    for key in ("base_weights", "loss_changes", "split_conditions", "sum_hessian"):
        _xarray(t[key], f"{where} {key}", n)
    for key, lo, hi in (("default_left", 0, 1), ("split_type", 0, 1), ("split_indices", 0, max(n_features - 1, 0)),
                        ("left_children", -1, n - 1), ("right_children", -1, n - 1),
                        ("parents", 0, 2147483647)):
        _xarray(t[key], f"{where} {key}", n, integer=True, lo=lo, hi=hi)
    left, right, parents = t["left_children"], t["right_children"], t["parents"]
    _xgb_categories(t, where, n)
    if parents[0] != 2147483647:
        _fail(f"{where} parents", "the root's parent must be 2147483647")
    seen = [False] * n
    seen[0] = True
    stack = [0]
    while stack:
        i = stack.pop()
        a, b = left[i], right[i]
        if (a == -1) != (b == -1):
            _fail(f"{where} node {i}", "has one child; a node has two children or none")
        if a == -1:
            continue
        for c in (a, b):
            if c == 0 or seen[c]:
                _fail(f"{where} node {i}", f"child {c} is reached twice (a cycle or a shared node)")
            if parents[c] != i:
                _fail(f"{where} node {c}", f"parent is {parents[c]}, expected {i}")
            seen[c] = True
            stack.append(c)
    if not all(seen):
        _fail(where, "some nodes are not reachable from the root")


def _xgb_categories(t, where, n):
    """Categorical splits: ``categories_nodes`` are the split nodes whose ``split_type`` is 1, in
    order; node i's categories are ``categories[segments[i]:segments[i] + sizes[i]]`` (at least one,
    increasing, in [0, 2**24]); the segments tile ``categories``."""
    nodes = _list(t["categories_nodes"], f"{where} categories_nodes")
    m = len(nodes)
    _xarray(nodes, f"{where} categories_nodes", m, integer=True, lo=0, hi=n - 1)
    _xarray(t["categories_segments"], f"{where} categories_segments", m, integer=True, lo=0, hi=1 << 40)
    _xarray(t["categories_sizes"], f"{where} categories_sizes", m, integer=True, lo=1, hi=_MAX_CATEGORY + 1)
    cats = _list(t["categories"], f"{where} categories")
    _xarray(cats, f"{where} categories", len(cats), integer=True, lo=0, hi=_MAX_CATEGORY)
    cat_nodes = [i for i, s in enumerate(t["split_type"]) if s == 1]
    if nodes != cat_nodes:
        _fail(f"{where} categories_nodes", "expected the nodes whose split_type is 1, in order")
    if any(t["left_children"][i] == -1 for i in nodes):
        _fail(f"{where} categories_nodes", "a leaf cannot have a categorical split")
    segments, sizes = t["categories_segments"], t["categories_sizes"]
    if segments != [sum(sizes[:i]) for i in range(m)] or sum(sizes) != len(cats):
        _fail(f"{where} categories_segments", "the segments and sizes do not tile the category list")
    for i in range(m):
        part = cats[segments[i]:segments[i] + sizes[i]]
        if any(a >= b for a, b in zip(part, part[1:])):
            _fail(f"{where} categories", f"node {nodes[i]}: categories not in increasing order")


def check_xgboost_json(text: str, *, n_features: int | None = None) -> None:
    """Raise ValueError unless ``text`` is a well-formed XGBoost JSON model of single-output trees."""
    if not isinstance(text, str):
        raise BoosterTextError("booster text: not a string")
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise BoosterTextError(f"booster text: not valid JSON ({' '.join(str(exc).split())[:120]})") from None
    _obj(doc, "top level", ("learner", "version"), ("learner", "version"))
    version = _list(doc["version"], "version", 3)
    for v in version:
        _xnum(v, "version", integer=True, lo=0, hi=1000)
    learner = _obj(doc["learner"], "learner", None, ("gradient_booster", "learner_model_param", "objective"))
    lmp = _obj(learner["learner_model_param"], "learner_model_param", None, ("num_feature",))
    width = _xnum(lmp["num_feature"], "learner_model_param num_feature", integer=True, lo=1, hi=MAX_FEATURES)
    if n_features is not None and width != n_features:
        _fail("learner_model_param num_feature", f"the booster has {width} features but the model file says "
                                                 f"{n_features}")
    for key in ("num_class", "num_target"):
        if key in lmp and _xnum(lmp[key], f"learner_model_param {key}", integer=True) not in (0, 1):
            _fail(f"learner_model_param {key}", "only single-output models are written by rankwise")
    if "base_score" in lmp:
        bs = lmp["base_score"]
        if isinstance(bs, str) and bs.startswith("[") and bs.endswith("]"):
            parts = [p for p in bs[1:-1].split(",") if p.strip()]
            if len(parts) != 1:
                _fail("learner_model_param base_score", "expected one value")
            bs = parts[0].strip()
        _xnum(bs, "learner_model_param base_score")
    for key in ("feature_names", "feature_types"):
        if key in learner:
            vals = _list(learner[key], key)
            if vals and (len(vals) != width or not all(isinstance(v, str) and len(v) < 1000 for v in vals)):
                _fail(key, f"expected {width} strings")
            if key == "feature_types" and not set(vals) <= {"q", "c", "int", "float", "i"}:
                _fail(key, "expected XGBoost's feature types: q, c, int, float or i")
    if "attributes" in learner:
        attrs = _obj(learner["attributes"], "attributes")
        if not all(isinstance(v, str) for v in attrs.values()):
            _fail("attributes", "values must be strings")
    obj = _obj(learner["objective"], "objective", None, ("name",))
    if not isinstance(obj["name"], str) or not re.fullmatch(r"[a-z_]+(:[a-z_]+)?", obj["name"]):
        _fail("objective name", "unexpected objective")
    gb = _obj(learner["gradient_booster"], "gradient_booster", ("model", "name"), ("model", "name"))
    if gb["name"] != "gbtree":
        _fail("gradient_booster name", f"expected 'gbtree', got {str(gb['name'])[:30]!r}")
    model = _obj(gb["model"], "model", ("cats", "gbtree_model_param", "iteration_indptr", "tree_info", "trees"),
                 ("gbtree_model_param", "iteration_indptr", "tree_info", "trees"))
    if "cats" in model:
        cats = _obj(model["cats"], "cats")
        if any(_list(v, f"cats {k}") for k, v in cats.items()):
            _fail("cats", "categorical features are not written by rankwise")
    gp = _obj(model["gbtree_model_param"], "gbtree_model_param", ("num_parallel_tree", "num_trees"), ("num_trees",))
    n_trees = _xnum(gp["num_trees"], "num_trees", integer=True, lo=0, hi=1 << 24)
    if _xnum(gp.get("num_parallel_tree", "1"), "num_parallel_tree", integer=True) != 1:
        _fail("num_parallel_tree", "forests are not written by rankwise")
    trees = _list(model["trees"], "trees", n_trees)
    info = _list(model["tree_info"], "tree_info", n_trees)
    if any(v != 0 or isinstance(v, bool) for v in info):
        _fail("tree_info", "expected 0 for every tree (one output group)")
    indptr = _list(model["iteration_indptr"], "iteration_indptr", n_trees + 1)
    if indptr != list(range(n_trees + 1)):
        _fail("iteration_indptr", "expected 0, 1, ..., num_trees (one tree per round)")
    for k, t in enumerate(trees):
        _xgb_tree(t, k, width)


def check_booster_text(backend: str, text: str, *, n_features: int | None = None) -> None:
    """Validate ``text`` for ``backend`` (``"lightgbm"`` or ``"xgboost"``)."""
    if backend == "lightgbm":
        check_lightgbm_text(text, n_features=n_features)
    elif backend == "xgboost":
        check_xgboost_json(text, n_features=n_features)
    else:
        raise BoosterTextError(f"booster text: unknown backend {backend!r}")
