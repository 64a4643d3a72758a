"""Run scores as real systems write them: full precision (``repr``, ``%.17g``), scientific
notation, long digit strings, tabs and runs of spaces, CRLF, gzip.

Every score must be exactly Python's ``float()`` of its token, and reading must do a bounded
amount of Python work whatever the number of scores the compiled parser leaves to ``float()``
(more than 18 significant digits, subnormal results): the reader once re-split the whole file
for each such line, and every full-precision ``repr`` score was one (a quadratic read: 20,000
lines of ``repr`` scores took 20 s). Linearity is checked structurally, never by timing: the
Python calls made while reading (every ``bytes.split`` included) are counted for a run with 40
such scores and one with 4,000, and must be the same. The compiled parser (Clinger's fast path,
then Eisel-Lemire up to 18 digits) is checked against ``float()`` on decimals next to the
halfway points between doubles, where a wrong rounding would show.
"""
from __future__ import annotations

import decimal
import gzip
import math
import sys

import numpy as np
import pytest

from rankwise.data import _svmlight_kernel as NK
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
        # 25 decimals (beyond the compiled parser's 18 digits: float()) and repr scores, in turn
        tokens = [f"{v:.25f}" if i % 2 else repr(v) for i, v in enumerate(rng.uniform(0.1, 0.9, size=n).tolist())]
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


def _parse(token: str):
    buf = np.frombuffer(token.encode(), dtype=np.uint8)
    return NK._parse_number(buf, 0, len(buf), NK._POW10)


def test_the_compiled_parser_rounds_as_float_next_to_halfway_points():
    decimal.getcontext().prec = 60
    rng = np.random.default_rng(5)
    values = np.abs(rng.normal(size=4000)) * 10.0 ** rng.integers(-320, 308, size=4000)
    tokens = ["9007199254740993", "9007199254740995", "1e23", "8.98846567431158e307", "1.7976931348623157e308",
              "1.7976931348623159e308", "2.2250738585072014e-308", "2.2250738585072011e-308", "4.9e-324",
              "123456789012345678e-5", "0.000000000000000000000000000001234567890123456789"]
    for v in values.tolist():
        if v == 0 or not math.isfinite(v):
            continue
        mid = (decimal.Decimal(v) + decimal.Decimal(math.nextafter(v, math.inf))) / 2  # exact halfway point
        tokens += [repr(v), f"{v:.16e}", f"{mid:.16e}", f"{mid:.17e}", f"-{mid:.15e}", f"{mid:.17e}".upper()]
    compiled = 0
    for tok in tokens:
        status, value = _parse(tok)
        assert status in (0, 1), tok
        if status == 0:  # decided by the compiled parser (status 1: left to float())
            compiled += 1
            assert value == float(tok) and math.copysign(1, value) == math.copysign(1, float(tok)), tok
    assert compiled > 0.9 * len(tokens)
    assert _parse("0.12345678901234567")[0] == 0 and _parse("9007199254740993")[0] == 1  # a true halfway: float()
