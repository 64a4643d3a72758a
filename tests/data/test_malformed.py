"""Corpus of malformed LETOR/SVMlight inputs: each must give a ParseError/InputError whose message
names path:line and says what is wrong and what was expected."""
from __future__ import annotations

import gzip
import re

import pytest

from rankwise.data import read_group_file, read_svmlight
from rankwise.errors import InputError, ParseError

GOOD = "1 qid:1 1:0.5 2:0.25\n0 qid:1 1:0.1 2:0.2\n"

# (id, file text, kwargs, expected line or None, regex the message must match)
CASES = [
    ("label_word", "abc qid:1 1:0.5\n", {}, 1, r"label 'abc' is not a number"),
    ("label_trailing_junk", GOOD + "1x qid:1 1:0.5\n", {}, 3, r"label '1x' is not a number"),
    ("label_two_dots", "1.2.3 qid:1 1:0.5\n", {}, 1, r"label '1\.2\.3' is not a number"),
    ("label_inf", "inf qid:1 1:0.5\n", {}, 1, r"label 'inf' is not finite"),
    ("label_nan", "nan qid:1 1:0.5\n", {}, 1, r"label 'nan' is not finite"),
    ("label_missing", "qid:1 1:0.5\n", {}, 1, r"expected a numeric label first"),
    ("label_missing_feature_first", GOOD + "1:0.5 2:0.3\n", {}, 3, r"expected a numeric label first"),
    ("qid_word", "1 qid:abc 1:0.5\n", {}, 1, r"query id 'qid:abc' is not an integer"),
    ("qid_empty", "1 qid: 1:0.5\n", {}, 1, r"query id 'qid:' is not an integer"),
    ("qid_float", "1 qid:1.5 1:0.5\n", {}, 1, r"query id 'qid:1\.5' is not an integer"),
    ("qid_after_features", "1 1:0.5 qid:3\n", {}, 1, r"'qid:3' is misplaced"),
    ("qid_twice", "1 qid:1 qid:2 1:0.5\n", {}, 1, r"'qid:2' is misplaced"),
    ("qid_missing_some", GOOD + "1 1:0.5 2:0.1\n", {}, 3, r"no 'qid:' on this line, but line 1 has one"),
    ("qid_missing_first", "1 1:0.5\n" + GOOD, {}, 1, r"no 'qid:' on this line, but line 2 has one"),
    ("no_qid_no_group", "1 1:0.5\n0 1:0.2\n", {}, 1, r"no 'qid:' in the file and no group file"),
    ("value_word", "1 qid:1 1:abc\n", {}, 1, r"value 'abc' is not a number"),
    ("value_empty", "1 qid:1 1:\n", {}, 1, r"value in '1:' is not a number"),
    ("value_two_colons", "1 qid:1 1:2:3\n", {}, 1, r"value in '1:2:3' is not a number"),
    ("value_inf", GOOD + "1 qid:2 1:inf\n", {}, 3, r"infinite value"),
    ("value_overflow_float32", "1 qid:1 1:1e39\n", {}, 1, r"infinite value"),
    ("value_exponent_garbage", "1 qid:1 1:1e+\n", {}, 1, r"value in '1:1e\+' is not a number"),
    ("index_word", "1 qid:1 a:0.5\n", {}, 1, r"feature index in 'a:0\.5' is not a non-negative integer"),
    ("index_negative", "1 qid:1 -1:0.5\n", {}, 1, r"feature index in '-1:0\.5' is not a non-negative integer"),
    ("index_empty", "1 qid:1 :0.5\n", {}, 1, r"feature index in ':0\.5' is not a non-negative integer"),
    ("index_float", "1 qid:1 1.5:0.5\n", {}, 1, r"feature index in '1\.5:0\.5' is not a non-negative integer"),
    ("index_zero_one_based", "1 qid:1 0:0.5 1:0.2\n", {}, 1, r"feature index 0 in '0:0\.5'.*zero_based=True"),
    ("index_duplicate", "1 qid:1 1:0.5 2:0.1 2:0.3\n", {}, 1, r"duplicate feature index in '2:0\.3'"),
    ("index_decreasing", GOOD + "0 qid:2 3:0.5 2:0.1\n", {}, 3, r"'2:0\.1' is smaller than the previous one"),
    ("index_overflow", "1 qid:1 99999999999999999999:1\n", {}, 1, r"is not a non-negative integer"),
    ("index_beyond_n_features", "1 qid:1 1:0.5 3:0.2\n", {"n_features": 2}, 1,
     r"'3:0\.2' is out of range; n_features=2 allows indices up to 2"),
    ("stray_token", "1 qid:1 1:0.5 foo 2:0.1\n", {}, 1, r"stray token 'foo'"),
    ("stray_number", "1 qid:1 1:0.5 7\n", {}, 1, r"stray token '7'"),
    ("control_char", "1 qid:1 1:0.5\x00\n", {}, 1, r"control character"),
    ("empty_file", "", {}, None, r"empty file: no data lines"),
    ("only_comments", "# header\n\n   \n# more\n", {}, None, r"empty file: no data lines"),
    ("docid_missing_some", "1 qid:1 1:0.5 #docid = A\n0 qid:1 1:0.1 # no id here\n1 qid:1 1:0.2 #docid = C\n",
     {}, 2, r"no '#docid = X' comment on this line, but line 1 has one; either every line names its doc id"),
    ("docid_missing_first", "1 qid:1 1:0.5\n0 qid:1 1:0.1 #docid = B\n", {}, 1,
     r"no '#docid = X' comment on this line, but line 2 has one"),
    ("docid_empty_value", "1 qid:1 1:0.5 #docid = A\n0 qid:1 1:0.1 #docid =\n", {}, 2,
     r"no '#docid = X' comment on this line, but line 1 has one"),
    ("noncontiguous_strict", "1 qid:1 1:0.5\n0 qid:2 1:0.1\n1 qid:1 1:0.3\n", {"strict": True}, None,
     r"rows of query 1 are not contiguous \(lines 1-1, 3-3\).*strict=False"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_malformed_line_gives_path_line_message(tmp_path, case):
    name, text, kwargs, line, pattern = case
    p = tmp_path / f"{name}.txt"
    p.write_bytes(text.encode("latin-1"))
    with pytest.raises(InputError) as info:
        read_svmlight(p, **kwargs)
    msg = str(info.value)
    prefix = f"{p}:{line}: " if line is not None else f"{p}"
    assert msg.startswith(prefix), msg
    assert re.search(pattern, msg), msg
    if line is not None:
        assert isinstance(info.value, ParseError) and info.value.line == line


def test_corpus_is_large_enough():
    assert len(CASES) + len(GROUP_CASES) + 3 >= 30


GROUP_CASES = [
    ("sizes_short", "1\n1\n", r"group sizes add up to 2 rows but the data file has 3 rows"),
    ("sizes_long", "2\n2\n", r"group sizes add up to 4 rows but the data file has 3 rows"),
    ("size_word", "2\nx\n", r":2: group size 'x' is not a non-negative integer"),
    ("size_zero", "3\n0\n", r":2: group size 0"),
    ("size_negative", "-1\n4\n", r":1: group size '-1' is not a non-negative integer"),
    ("empty_group_file", "\n", r"empty group file"),
]


@pytest.mark.parametrize("case", GROUP_CASES, ids=[c[0] for c in GROUP_CASES])
def test_bad_group_file(tmp_path, case):
    name, text, pattern = case
    data = tmp_path / "d.txt"
    data.write_text("1 1:0.5\n0 1:0.1\n1 1:0.3\n")
    q = tmp_path / "d.txt.query"
    q.write_text(text)
    with pytest.raises(ParseError) as info:
        read_svmlight(data)  # picks up d.txt.query by itself
    assert str(info.value).startswith(str(q)), str(info.value)
    assert re.search(pattern, str(info.value)), str(info.value)
    with pytest.raises(ParseError):
        read_group_file(q, n_rows=3)


def test_qid_and_query_file_conflict(tmp_path):
    data = tmp_path / "d.txt"
    data.write_text(GOOD)
    q = tmp_path / "g.query"
    q.write_text("2\n")
    with pytest.raises(InputError, match="pass only one of them"):
        read_svmlight(data, query_file=q)


def test_truncated_gzip(tmp_path):
    p = tmp_path / "t.txt.gz"
    p.write_bytes(gzip.compress(GOOD.encode() * 50)[:-20])
    with pytest.raises(ParseError, match=r"cannot decompress .* truncated or corrupt"):
        read_svmlight(p)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_svmlight(tmp_path / "nope.txt")


def test_error_line_counts_blank_and_comment_lines(tmp_path):
    p = tmp_path / "c.txt"
    p.write_text("# header\n\n1 qid:1 1:0.5\n\n0 qid:1 1:x\n")
    with pytest.raises(ParseError, match=r":5: value 'x' is not a number") as info:
        read_svmlight(p)
    assert info.value.line == 5
