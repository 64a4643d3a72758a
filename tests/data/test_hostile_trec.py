"""TREC readers refuse invisible characters that would become part of an id (issue 17 fuzz findings)."""
import re

import pytest

from rankwise.data import read_trec_qrels, read_trec_run
from rankwise.errors import ParseError


@pytest.mark.parametrize("content,line,needle", [
    (b"301 0 D1 1\n3\xef\xbb\xbf01 0 D2 1\n", 2, "U+FEFF (a byte-order mark)"),
    (b"301 0 FBIS3-1008\xef\xbb\xbf2 1\n", 1, "U+FEFF (a byte-order mark)"),
    ("301 0 a\u00a0b 1\n".encode(), 1, "U+00A0 (NO-BREAK SPACE)"),
    ("301 0 a\u2028b 1\n".encode(), 1, "U+2028 (LINE SEPARATOR)"),
    (b"301 0 D1 1\r301 0 D2 0\r", 1, "carriage return"),
    (b"301 0 D1 1\n301 0 D2 29223372036854785808\n", 2, "is not an integer"),
    (b"301 0 D\x1b1 1\n", 1, "control byte 0x1b"),
])
def test_qrels_refuse_invisible(tmp_path, content, line, needle):
    p = tmp_path / "q.qrels"
    p.write_bytes(content)
    with pytest.raises(ParseError, match=f":{line}: .*{re.escape(needle)}"):
        read_trec_qrels(p)


@pytest.mark.parametrize("content,needle", [
    (b"301 Q0 \xef\xbb\xbfD1 1 12.5 tag\n", "U+FEFF"),
    (b"301 Q0 D1 1 12.5 ta\xef\xbb\xbfg\n", "U+FEFF"),
    ("301 Q0 \u200bD 1 1 t\n".encode(), "U+200B"),
])
def test_run_refuses_invisible(tmp_path, content, needle):
    p = tmp_path / "r.run"
    p.write_bytes(content)
    with pytest.raises(ParseError, match=re.escape(f"{p}:1: invisible character {needle}")):
        read_trec_run(p)


def test_printable_non_ascii_ids_still_read(tmp_path):
    p = tmp_path / "q.qrels"
    p.write_bytes("301 0 caf\u00e9-\u0661 1\n".encode())
    assert read_trec_qrels(p) == {"301": {"caf\u00e9-\u0661": 1}}
