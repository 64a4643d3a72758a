"""The compiled TREC scanner (``_trec_kernel.scan``: one pass per line, fields found 8 bytes at a
time) against a reference written in Python from the reader's rules, on run and qrels texts
mutated byte by byte (control bytes, DEL, CR, tabs, spaces, UTF-8 bytes, ``#``, line breaks at
random places; fields across every 8-byte boundary; ends of the buffer): the same records (line,
query and document spans, values), or the same error code on the same line.
"""
from __future__ import annotations

import random
import re

import numpy as np
import pytest

from rankwise.data import _trec_kernel as TK

_INT = re.compile(rb"[+-]?[0-9]+")
_NUMBER = re.compile(rb"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def reference_scan(raw: bytes, kind: int):
    """``(err, err_line, records)``, records ``(line, qs, qe, ds, de, value)``: the reader's rules."""
    if raw.startswith(b"\xef\xbb\xbf"):
        return TK.E_BOM, 1, []
    records, pos, lineno, eol, n = [], 0, 0, 0, len(raw)
    while pos < n:
        lineno += 1
        end = pos
        while end < n and raw[end] != 10:  # the line's end; a refused byte stops the scan
            c = raw[end]
            if c == 13:
                if end + 1 < n and raw[end + 1] == 10:
                    break
                return TK.E_CR, lineno, records
            if (c < 32 and c != 9) or c == 127:
                return TK.E_CONTROL, lineno, records
            end += 1
        nxt = end + 1
        if end < n and raw[end] == 13:
            if eol == 1:
                return TK.E_MIXED_EOL, lineno, records
            eol, nxt = 2, end + 2
        elif end < n:
            if eol == 2:
                return TK.E_MIXED_EOL, lineno, records
            eol = 1
        fields = [(m.start() + pos, m.end() + pos) for m in re.finditer(rb"[^ \t]+", raw[pos:end])]
        pos = nxt
        if not fields or raw[fields[0][0]] == 35:
            continue
        if (kind == 0 and len(fields) != 4) or (kind == 1 and len(fields) < 6):
            return TK.E_FIELDS, lineno, records
        tok = [raw[a:b] for a, b in fields]
        if not _INT.fullmatch(tok[3]) or not -2 ** 63 <= int(tok[3]) < 2 ** 63:
            return (TK.E_REL if kind == 0 else TK.E_RANK), lineno, records
        if kind == 0:
            if abs(int(tok[3])) > TK.REL_MAX:
                return TK.E_REL_RANGE, lineno, records
            value = int(tok[3])
        else:
            if not _NUMBER.fullmatch(tok[4]):
                return TK.E_SCORE, lineno, records
            value = float(tok[4])
        records.append((lineno, *fields[0], *fields[2], value))
    return TK.OK, 0, records


def compiled_scan(raw: bytes, kind: int):
    buf = np.frombuffer(raw, dtype=np.uint8)
    err, err_line, n, line, qs, qe, ds, de, qh, dh, ival, fval, fb, n_fb, _, _ = TK.scan(buf, kind, -1, TK._POW10)
    values = (ival if kind == 0 else fval)[:n].tolist()
    for row, a, b in fb[:n_fb].tolist():  # the scores the kernel leaves to float()
        values[row] = float(raw[a:b])
    records = list(zip(line[:n].tolist(), qs[:n].tolist(), qe[:n].tolist(), ds[:n].tolist(), de[:n].tolist(), values))
    if not err:
        assert qh[:n].tolist() == TK.hashes(buf, qs[:n], qe[:n]).tolist()
        assert dh[:n].tolist() == TK.hashes(buf, ds[:n], de[:n]).tolist()
    return err, err_line, records


def _base_text(rng: random.Random, kind: int) -> bytes:
    lines = []
    for q in range(rng.randint(1, 4)):
        for r in range(rng.randint(1, 6)):
            doc = rng.choice(["d", "FBIS3-0951184", "LA0101-1576057-extra-long-id", "é日本",
                              "x" * rng.randint(1, 17)])
            sep = rng.choice([" ", "\t", "  ", " \t "])
            if kind == 0:
                fields = [f"q{q}", "0", f"{doc}{r}", str(rng.randint(-1, 3))]
            else:
                score = rng.choice([repr(rng.uniform(-9, 9)), f"{rng.uniform(-9, 9):.16e}", f"{rng.random():.4f}",
                                    "-8.0459999999999994", "1e5", ".5", "3.", "0.12345678901234567890123"])
                fields = [f"q{q}", "Q0", f"{doc}{r}", str(r + 1), score, "run_tag"] + (["extra"] if r == 2 else [])
            lines.append(sep.join(fields) + rng.choice(["", " ", "\t"]))
        if rng.random() < 0.3:
            lines.append(rng.choice(["", "# a comment", "   ", "\t"]))
    eol = "\r\n" if rng.random() < 0.3 else "\n"
    return (eol.join(lines) + (eol if rng.random() < 0.9 else "")).encode("utf-8")


MUTATIONS = [b"\x00", b"\x01", b"\t", b"\x0b", b"\x0c", b"\r", b"\n", b"\r\n", b" ", b"\x7f", b"\x80", b"\xc3\xa9",
             b"#", b"x", b".", b"e", b"-", b"\xef\xbb\xbf"]


@pytest.mark.parametrize("kind", [0, 1])
def test_the_compiled_scanner_equals_the_reference_on_mutated_texts(kind):
    rng = random.Random(5 + kind)
    for case in range(1500):
        raw = _base_text(rng, kind)
        for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
            at = rng.randint(0, len(raw))
            cut = rng.choice([0, 0, 1])  # insert, or replace one byte
            raw = raw[:at] + rng.choice(MUTATIONS) + raw[at + cut:]
        want = reference_scan(raw, kind)
        got = compiled_scan(raw, kind)
        assert got[:2] == want[:2], (case, raw)
        if not want[0]:
            assert got[2] == want[2], (case, raw)


def test_fields_of_every_length_across_word_boundaries():
    for width in range(1, 40):
        for shift in range(9):
            tail = "\x7f" if width == 7 else ""  # DEL ends a field too (refused)
            raw = (" " * shift + f"q Q0 {'d' * width} 1 {'7' * min(width, 15)}.5 t{tail}\n").encode()
            assert compiled_scan(raw, 1) == reference_scan(raw, 1), raw
