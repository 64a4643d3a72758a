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
    ("nul_byte", "1 qid:1 1:0.5\x00\n", {}, 1, r"NUL byte in the text"),
    ("control_char", "1 qid:1 1:0.5\x01\n", {}, 1, r"control character"),
    ("control_char_in_docid", "1 qid:1 1:0.5 #docid = a\x1bb\n", {}, 1, r"control character '\\x1b'"),
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


# -- hostile input (issue 17): what int()/float() or a naive line split would silently accept ----
HOSTILE = [
    ("cr_only", b"1 qid:1 1:0.5 #docid = a\r0 qid:1 1:0.1 #docid = b\r", 1, r"carriage return not followed by a line "
                                                                            r"feed \(old Mac 'CR' line endings"),
    ("cr_stray", b"1 qid:1 1:0.5\n0 qid:1\r1:0.1\n", 2, r"carriage return not followed by a line feed"),
    ("mixed_endings", b"1 qid:1 1:0.5\r\n0 qid:1 1:0.1\n1 qid:1 1:0.2\r\n", 2,
     r"mixed line endings: line 1 ends with CRLF but this line with LF alone"),
    ("utf8_bom", b"\xef\xbb\xbf1 qid:1 1:0.5\n", 1, r"starts with a UTF-8 byte-order mark"),
    ("utf16_bom", b"\xff\xfe1\x00", 1, r"starts with a UTF-16 byte-order mark"),
    ("nul_in_docid", b"1 qid:1 1:0.5 #docid = a\x00b\n", 1, r"NUL byte in the text"),
    ("arabic_indic_label", "١ qid:1 1:0.5\n".encode(), 1, r"label '١' is not a number"),
    ("fullwidth_value", "1 qid:1 1:１\n".encode(), 1, r"value '１' is not a number"),
    ("underscore_value", b"1 qid:1 1:1_0\n", 1, r"value in '1:1_0' is not a number"),
    ("underscore_label", b"1_0 qid:1 1:1\n", 1, r"label '1_0' is not a number"),
    ("qid_beyond_int64", b"1 qid:9223372036854775808 1:1\n", 1, r"query id 'qid:9223372036854775808' is not an integer"),
    ("index_beyond_int64", b"1 qid:1 9223372036854775808:1\n", 1, r"feature index in '9223372036854775808:1' is not"),
    ("relevance_1e30", b"1000000000000000000000000000000 qid:1 1:1\n", 1,
     r"label '1000000000000000000000000000000' is out of range; relevance labels must lie in \[-1023, 1023\]"),
    ("relevance_negative_huge", b"-1e300 qid:1 1:1\n", 1, r"label '-1e300' is out of range"),
]


@pytest.mark.parametrize("case", HOSTILE, ids=[c[0] for c in HOSTILE])
def test_hostile_bytes_are_refused_with_path_and_line(tmp_path, case):
    name, data, line, pattern = case
    p = tmp_path / f"{name}.txt"
    p.write_bytes(data)
    with pytest.raises(ParseError) as info:
        read_svmlight(p)
    assert info.value.line == line and str(info.value).startswith(f"{p}:{line}: "), str(info.value)
    assert re.search(pattern, str(info.value)), str(info.value)


def test_int64_limits_are_exact(tmp_path):
    p = tmp_path / "max.txt"
    p.write_bytes(b"1 qid:9223372036854775807 1:1\n0 qid:-9223372036854775807 1:2\n")
    ds = read_svmlight(p)
    assert ds.qid.tolist() == [9223372036854775807, -9223372036854775807]  # never wrapped
    p.write_bytes(b"1023 qid:1 1:1\n-1023 qid:1 1:2\n")
    assert read_svmlight(p).labels.tolist() == [1023.0, -1023.0]


def test_crlf_files_still_read(tmp_path):
    p = tmp_path / "crlf.txt"
    p.write_bytes(b"1 qid:1 1:0.5 #docid = a\r\n0 qid:1 1:0.1 #docid = b\r\n")
    ds = read_svmlight(p)
    assert ds.doc_ids.tolist() == ["a", "b"] and ds.labels.tolist() == [1.0, 0.0]


@pytest.mark.parametrize("name,mangle,pattern", [
    ("crc", lambda z: z[:-8] + bytes([z[-8] ^ 1]) + z[-7:], r"cannot decompress \(BadGzipFile: CRC check failed"),
    ("block", lambda z: z[:10] + b"\xff" * 8 + z[18:], r"cannot decompress \(zlib\.error: Error -3"),
    ("cut", lambda z: z[:15], r"cannot decompress \(EOFError"),
    ("bz2", lambda z: b"BZh9" + b"\x00" * 40, r"cannot decompress"),
    ("xz", lambda z: b"\xfd7zXZ\x00" + b"\x01" * 40, r"cannot decompress \(LZMAError"),
])
def test_corrupt_compression_is_a_parse_error(tmp_path, name, mangle, pattern):
    p = tmp_path / f"{name}.txt.gz"
    p.write_bytes(mangle(gzip.compress((GOOD * 20).encode())))
    with pytest.raises(ParseError, match=pattern):
        read_svmlight(p)
    q = tmp_path / f"{name}.query"
    q.write_bytes(p.read_bytes())
    with pytest.raises(ParseError, match=pattern):
        read_group_file(q)


@pytest.mark.parametrize("text,line,pattern", [
    (b"2\n100000000000000000000\n", 2, r"group size 100000000000000000000 is out of range"),
    (b"9007199254740992\n9007199254740992\n", 2, r"add up to 18014398509481984 rows, beyond"),
    ("2\n²\n".encode(), 2, r"group size '²' is not a non-negative integer; expected one integer \(ASCII digits\)"),
    ("2\n٣\n".encode(), 2, r"group size '٣' is not a non-negative integer"),
    (b"1_0\n", 1, r"group size '1_0' is not a non-negative integer"),
    (b"2\r3\r", 1, r"carriage return not followed by a line feed"),
    (b"\xef\xbb\xbf2\n", 1, r"byte-order mark"),
    (b"2\n3\x00\n", 2, r"NUL byte"),
])
def test_hostile_group_files(tmp_path, text, line, pattern):
    q = tmp_path / "g.query"
    q.write_bytes(text)
    with pytest.raises(ParseError) as info:
        read_group_file(q)
    assert info.value.line == line, str(info.value)
    assert re.search(pattern, str(info.value)), str(info.value)


def test_data_format_error_is_the_parse_error():
    from rankwise.errors import DataFormatError, RankwiseError

    assert DataFormatError is ParseError and issubclass(DataFormatError, RankwiseError)


def test_the_compiled_line_end_check_finds_what_the_regular_expressions_find():
    """``check_text_bytes``'s compiled scan against the two regular expressions it replaced, on random
    texts of CR, LF and other bytes (ends of the buffer included): the first bare CR, the first LF
    without its CR."""
    import random

    import numpy as np

    from rankwise.data import _svmlight_kernel as K

    rng = random.Random(27)
    texts = [b"", b"\r", b"\n", b"\r\n", b"\n\r", b"a\r\n\n", b"\r\n\r"]
    texts += [bytes(rng.choice(b"\r\n\r\nab") for _ in range(rng.randint(1, 30))) for _ in range(3000)]
    for text in texts:
        cr = re.search(rb"\r(?!\n)", text)
        lf = re.search(rb"(?<!\r)\n", text)
        bare_cr, lone_lf = K.line_end_faults(np.frombuffer(text, dtype=np.uint8))
        assert (bare_cr, lone_lf) == (cr.start() if cr else -1, lf.start() if lf else -1), text
