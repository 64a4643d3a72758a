"""Run scores as real systems write them: full precision (``repr``, ``%.17g``), scientific
notation, long digit strings, tabs and runs of spaces, CRLF, gzip.

Every score must be exactly Python's ``float()`` of its token, and reading must do a bounded
amount of Python work whatever the number of scores outside the kernel's exact fast path: a
full-precision score (17 significant digits) is outside it, and the reader once re-split the
whole file for each such line (a quadratic read: 20,000 lines of ``repr`` scores took 20 s).
Linearity is checked structurally, never by timing: the Python calls made while reading (every
``bytes.split`` included) are counted for a run with 40 such scores and one with 4,000, and must
be the same.
"""
from __future__ import annotations

import gzip
import sys

import numpy as np
import pytest

from rankwise.data.trec import Qrels, Run, read_trec_run, write_trec_run
from rankwise.errors import ParseError

#: spellings found in run files, with the edges of the kernel's fast path (2**53, 10**22)
SPELLINGS = ["0.12345678901234567", "1.2345678901234567e-05", "-3E+2", "+.5e-3", "5.", ".5", "-0.0", "0",
             "0.1234567890123456789012345", "123456789012345678901234", "9007199254740992", "9007199254740993",
             "9007199254740993e-3", "1e22", "1e23", "1E-22", "1e-23", "123456789e-30", "4.9e-324",
             "2.2250738585072014e-308", "2.2250738585072011e-308", "1.7976931348623157e308", "-1.5e+300",
             "0.30000000000000004", "1.0000000000000002", "7.0710678118654757e-01", "000012.5000",
             "1.00000000000000000000000000000000000000001", "99999999999999999999e-20", "-.0000001e+7"]


def _scores(rng, n):
    """Scores as systems print them: repr of doubles over many magnitudes, %.17g, %.16e (some
    with a capital E), float32 values printed at double precision, and the fixed spellings."""
    mags = 10.0 ** rng.integers(-30, 30, size=n)
    vals = rng.normal(size=n) * mags
    out = []
    for i, v in enumerate(vals.tolist()):
        kind = i % 5
        if kind == 0:
            out.append(repr(v))
        elif kind == 1:
            out.append(f"{v:.17g}")
        elif kind == 2:
            out.append(f"{v:.16e}".upper() if i % 2 else f"{v:.16e}")
        elif kind == 3:
            out.append(repr(float(np.float32(v))))
        else:
            out.append(SPELLINGS[i // 5 % len(SPELLINGS)])
    return out


def _run_text(tokens, *, n_topics=7, eol="\n", seps=(" ",), grouped=False):
    """A run line per token; topics interleaved, or ``grouped`` (each topic's lines together, as
    systems write them)."""
    lines = []
    for i, tok in enumerate(tokens):
        sep = seps[i % len(seps)]
        topic = 301 + (i * n_topics // len(tokens) if grouped else i % n_topics)
        lines.append(sep.join([f"{topic}", "Q0", f"FBIS3-{i:06d}", str(i + 1), tok, "sys.run"]) + eol)
    return "".join(lines)


@pytest.mark.parametrize("eol,seps,gz", [("\n", (" ",), False), ("\r\n", (" ",), False),
                                         ("\n", ("\t", "  ", " \t "), False), ("\r\n", ("\t", "   "), True)],
                         ids=["lf", "crlf", "tabs-spaces", "crlf-tabs-gz"])
def test_every_score_is_exactly_pythons_float(tmp_path, eol, seps, gz):
    rng = np.random.default_rng(7)
    tokens = _scores(rng, 3000)
    text = _run_text(tokens, eol=eol, seps=seps)
    path = tmp_path / ("run.txt.gz" if gz else "run.txt")
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    got = read_trec_run(path)
    n = 0
    for i, tok in enumerate(tokens):
        want = float(tok)
        value = got[str(301 + i % 7)][f"FBIS3-{i:06d}"]
        assert value == want and np.signbit(value) == np.signbit(want), (tok, value, want)
        n += 1
    assert n == len(tokens)
    run = Run.read(path)  # the flat arrays too: bit for bit
    flat = dict(zip(run.docs.strings(), run.scores.tolist()))
    assert all(flat[f"FBIS3-{i:06d}"].hex() == float(tok).hex() for i, tok in enumerate(tokens))


def test_written_runs_read_back_bit_for_bit(tmp_path):
    rng = np.random.default_rng(11)
    run = {str(q): {f"d{q}-{k}": float(v) for k, v in enumerate(rng.normal(size=500) * 10.0 ** rng.integers(
        -20, 20, size=500))} for q in range(20)}
    write_trec_run(run, tmp_path / "r.txt")
    back = read_trec_run(tmp_path / "r.txt")
    assert back == run
    assert all(back[q][d].hex() == run[q][d].hex() for q in run for d in run[q])


def _profile_read(path):
    """(Python-level call events, bytes.split calls) while ``Run.read(path)`` runs."""
    counts = {"events": 0, "split": 0}

    def prof(frame, event, arg):
        if event in ("call", "c_call"):
            counts["events"] += 1
            if event == "c_call" and getattr(arg, "__name__", "") in ("split", "splitlines") \
                    and isinstance(getattr(arg, "__self__", None), (bytes, bytearray)):
                counts["split"] += 1

    sys.setprofile(prof)
    try:
        run = Run.read(path)
    finally:
        sys.setprofile(None)
    return counts, run


def test_reading_full_precision_scores_is_one_pass(tmp_path):
    """The Python work of a read does not grow with the number of full-precision scores."""
    rng = np.random.default_rng(3)
    counts = []
    for n in (40, 4000):
        tokens = [repr(v) for v in rng.uniform(0.1, 0.9, size=n).tolist()]  # 17 digits: all off the fast path
        path = tmp_path / f"run{n}.txt"
        path.write_text(_run_text(tokens, n_topics=4, grouped=True))
        Run.read(path)  # kernels compiled / loaded, lazy imports done
        c, run = _profile_read(path)
        assert len(run) == n and sorted(run.scores.tolist()) == sorted(float(t) for t in tokens)
        counts.append(c)
    small, large = counts
    assert large["split"] == small["split"] <= 1, counts  # no split of the file per score
    assert large["events"] == small["events"], counts  # no Python call per score


def test_qrels_are_read_in_one_pass(tmp_path):
    # qrels hold integers only (no float fallback): the same bound holds (topics grouped, as in
    # every qrels file: the reader does Python work per run of one topic's lines, not per line)
    counts = []
    for n in (40, 4000):
        path = tmp_path / f"q{n}.txt"
        path.write_text("".join(f"{301 + 4 * i // n} 0 FBIS3-{i:06d} {i % 3}\r\n" for i in range(n)))
        Qrels.read(path)
        c = {"events": 0}

        def prof(frame, event, arg, c=c):
            c["events"] += event in ("call", "c_call")

        sys.setprofile(prof)
        try:
            Qrels.read(path)
        finally:
            sys.setprofile(None)
        counts.append(c["events"])
    assert counts[0] == counts[1], counts


@pytest.mark.parametrize("token,message", [
    ("nan", r":3: score 'nan' is not finite"), ("-Infinity", r":3: score '-Infinity' is not finite"),
    ("1e999", r":3: score '1e999' is out of the range of a double"),
    ("-1.2345678901234567e400", r":3: score '-1.2345678901234567e400' is out of the range of a double"),
    ("0.12345678901234567x", r":3: score '0.12345678901234567x' is not a number"),
    ("1_000.12345678901234567", r":3: score '1_000.12345678901234567' is not a number"),
    ("..5", r":3: score '\.\.5' is not a number"), ("e5", r":3: score 'e5' is not a number"),
    ("+", r":3: score '\+' is not a number")])
def test_bad_scores_name_the_line(tmp_path, token, message):
    path = tmp_path / "run.txt"
    path.write_text(f"1 Q0 a 1 0.12345678901234567 t\n1 Q0 b 2 0.5 t\n1 Q0 c 3 {token} t\n")
    with pytest.raises(ParseError, match=message):
        Run.read(path)
