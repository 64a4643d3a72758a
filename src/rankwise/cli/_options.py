"""Options shared by several sub-commands' parsers (light: building a parser imports no numpy)."""
from __future__ import annotations


def add_allow_truncated(p) -> None:
    """The ``--allow-truncated`` option of the commands that read TREC runs, qrels or SVMlight files
    (defined here, not in ``inputs``: building the parser imports no numpy)."""
    p.add_argument("--allow-truncated", action="store_true",
                   help="read a TREC run, qrels or SVMlight file whose last line has no line break (or, written by "
                        "rankwise, whose closing '# rankwise-svmlight end' line is missing) as it is; without it "
                        "such a file -- what a copy or a write cut short leaves -- is an error naming file:line")
