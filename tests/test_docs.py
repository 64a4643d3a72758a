"""Every code example in the docs runs: README.md and docs/*.md, block by block.

How blocks are run
------------------
- ```` ```python ```` blocks of one file run in order in **one namespace** (a later block may use
  names an earlier one defined), in a fresh temporary working directory, with
  ``RANKWISE_DATA`` pointing at the real data when it is present (``$RANKWISE_DATA`` or
  ``../shared/data``, as in ``tests/conftest.py``) and torch limited to one thread (two xdist
  workers share a 2-core machine; torch's default of one thread per core makes small tensor ops
  tens of times slower when the cores are busy).
- ```` ```bash ```` blocks whose every command is ``rankwise ...``, ``python -c ...`` or a variable
  assignment ``NAME=value`` run too, in the same working directory, in order with the Python
  blocks: ``rankwise ARGS`` calls ``rankwise.cli.main(ARGS)`` in-process (the function the
  ``rankwise`` script calls; the subprocess path is covered by ``tests/cli``) and must return 0;
  ``python -c`` runs in a subprocess; an assignment sets an environment variable for the rest of
  the file. ``$VARS`` are expanded, ``\\`` continues a line, ``#`` starts a comment. Other bash
  blocks (``make``, ``pip``, ``dask scheduler``) are not run, but every ``rankwise COMMAND``
  they (or ``text`` blocks) mention must exist in the parser.
- A block that needs the real data says so on a comment line of its own::

      # needs $RANKWISE_DATA/MQ2008

  (any number of ``$RANKWISE_DATA/<folder>`` on that line). Where one of these folders is
  absent, that block is left out and the others still run; the test then skips with a message
  naming what is missing — at once if a later block uses a name the left-out block defines
  (a ``NameError``), else after the last block.
- A ```` ```python ```` block whose first line is ``# not run`` is an illustration and is skipped
  (for code that needs a cluster or a network); keep these rare.

The README's ```` ```text ```` blocks show what its examples print: after the README's blocks ran,
every line of those blocks must be a line they printed (stdout or stderr).

Also checked here: the README's set-up section has exactly the two commands ``make demo`` and
``make test`` and they come first; the loss table of docs/losses.md lists exactly the registry,
with each loss's family, convexity, calibration and Lipschitz entry as ``rankwise.losses.spec``
declares them; docs/index.md links every page; docs/metrics.md has the profiles table for every
profile; docs/theory.md shows the list-length figure, which exists.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC_FILES = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))

_FENCE = re.compile(r"^```([\w+-]*)\s*$")
_NEEDS = re.compile(r"^\s*#\s*needs\s+\$RANKWISE_DATA")
_NEEDED_PATH = re.compile(r"\$RANKWISE_DATA((?:/[\w.\-]+)*)")


@dataclass
class Block:
    path: Path
    lang: str
    code: str
    line: int  # line number of the opening fence

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    @property
    def not_run(self) -> bool:
        first = next((ln for ln in self.code.splitlines() if ln.strip()), "")
        return first.strip().lower().startswith("# not run")

    def needed_data(self) -> list[str] | None:
        """Folders under $RANKWISE_DATA this block needs, or None if it needs no real data."""
        for ln in self.code.splitlines():
            if _NEEDS.match(ln):
                return [m.group(1).lstrip("/") for m in _NEEDED_PATH.finditer(ln)]
        return None


def extract_blocks(path: Path) -> list[Block]:
    blocks, lang, start, body = [], None, 0, []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if lang is None:
            m = _FENCE.match(line)
            if m:
                lang, start, body = m.group(1).lower(), i, []
        elif line.startswith("```"):
            blocks.append(Block(path, lang, "\n".join(body) + "\n", start))
            lang = None
        else:
            body.append(line)
    assert lang is None, f"{path}:{start}: code fence never closed"
    return blocks


# -- the data ------------------------------------------------------------------------------------

def data_root() -> Path | None:
    env = os.environ.get("RANKWISE_DATA")
    for c in ([Path(env)] if env else []) + [REPO.parent / "shared" / "data"]:
        if c.is_dir():
            return c.resolve()
    return None


def missing_data(needed: list[str]) -> str | None:
    root = data_root()
    if root is None:
        return ("real data absent: set RANKWISE_DATA or put the data sets in ../shared/data "
                f"(needed: {', '.join(needed) or 'the data folder'})")
    absent = [n for n in needed if n and not (root / n).exists()]
    if absent:
        return f"real data incomplete: {', '.join(str(root / n) for n in absent)} absent"
    return None


# -- bash blocks ---------------------------------------------------------------------------------

def shell_commands(code: str) -> list[list[str]]:
    """Commands of a bash block (comments dropped, ``\\`` continuations joined, $VARS expanded)."""
    text = re.sub(r"\\\n", " ", code)
    out = []
    for line in text.splitlines():
        argv = shlex.split(os.path.expandvars(line), comments=True)
        if argv:
            out.append(argv)
    return out


_ASSIGN = re.compile(r"^([A-Za-z_]\w*)=(.*)$")


def _is_assignment(argv: list[str]) -> bool:
    return len(argv) == 1 and _ASSIGN.match(argv[0]) is not None


def runnable_bash(code: str) -> bool:
    cmds = shell_commands(code)
    return bool(cmds) and all(c[0] == "rankwise" or c[:2] == ["python", "-c"] or _is_assignment(c) for c in cmds)


def run_bash(block: Block, monkeypatch) -> None:
    from rankwise.cli import main

    # expand line by line: an assignment affects the lines after it
    text = re.sub(r"\\\n", " ", block.code)
    for line in text.splitlines():
        argv = shlex.split(os.path.expandvars(line), comments=True)
        if not argv:
            continue
        if _is_assignment(argv):
            name, value = _ASSIGN.match(argv[0]).groups()
            monkeypatch.setenv(name, value)
            continue
        shown = " ".join(shlex.quote(a) for a in argv)
        if argv[0] == "python":
            proc = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, f"{block.where}: `{shown}` failed:\n{proc.stderr[-3000:]}"
            sys.stdout.write(proc.stdout)
            continue
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv[1:])
        sys.stdout.write(out.getvalue())
        sys.stderr.write(err.getvalue())
        assert code == 0, f"{block.where}: `{shown}` exited with {code}:\n{err.getvalue()[-3000:]}"


# -- running a file ------------------------------------------------------------------------------

@pytest.fixture
def doc_env(tmp_path, monkeypatch):
    """A temporary working directory, RANKWISE_DATA set where the data exists, torch on one thread."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    root = data_root()
    if root is not None:
        monkeypatch.setenv("RANKWISE_DATA", str(root))
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch
        except ImportError:  # pragma: no cover - torch is a dependency
            torch = None
    threads = torch.get_num_threads() if torch is not None else None
    if torch is not None:
        torch.set_num_threads(1)
    try:
        yield tmp_path
    finally:
        if torch is not None:
            torch.set_num_threads(threads)


def _runnable(path: Path) -> list[Block]:
    return [b for b in extract_blocks(path)
            if (b.lang == "python" and not b.not_run) or (b.lang == "bash" and runnable_bash(b.code))]


@pytest.mark.parametrize("path", [p for p in DOC_FILES if _runnable(p)], ids=lambda p: str(p.relative_to(REPO)))
def test_code_examples_run(path, doc_env, monkeypatch, capsys):
    namespace = {"__name__": "__main__"}
    skipped = []  # (block, why) of the blocks whose data is absent
    try:
        for block in _runnable(path):
            needed = block.needed_data()
            if needed is not None:
                why = missing_data(needed)
                if why is not None:
                    skipped.append((block, why))
                    continue
            try:
                if block.lang == "bash":
                    run_bash(block, monkeypatch)
                    continue
                namespace["__file__"] = str(doc_env / "doc_example.py")
                exec(compile(block.code, block.where, "exec"), namespace)
            except NameError as exc:
                if skipped:  # it uses a name a skipped block would have defined
                    pytest.skip(f"{block.where} needs {skipped[0][0].where}, skipped: {skipped[0][1]}")
                raise AssertionError(f"{block.where}: the example raised NameError: {exc}") from exc
            except Exception as exc:
                raise AssertionError(f"{block.where}: the example raised {type(exc).__name__}: {exc}") from exc
    finally:
        _close_clusters(namespace)
    if skipped:
        pytest.skip("ran every block but " + "; ".join(f"{b.where} ({why})" for b, why in skipped))
    if path.name == "README.md":
        _check_printed_output(path, capsys)


def _check_printed_output(path: Path, capsys) -> None:
    """The README shows what its examples print: every line of its ``text`` blocks is a line the
    examples printed (stdout or stderr), as printed."""
    captured = capsys.readouterr()
    sys.stdout.write(captured.out)
    printed = {ln.rstrip() for ln in (captured.out + "\n" + captured.err).splitlines()}
    for block in extract_blocks(path):
        if block.lang != "text":
            continue
        for k, line in enumerate(block.code.splitlines(), start=1):
            if line.strip():
                assert line.rstrip() in printed, \
                    f"{block.where}: line {k} of the shown output was not printed by the examples: {line!r}"


def _close_clusters(namespace: dict) -> None:
    """Shut down Dask clients (and the local clusters they run on) that an example left open."""
    for value in list(namespace.values()):
        if type(value).__name__ == "Client" and type(value).__module__.startswith("distributed"):
            cluster = getattr(value, "cluster", None)
            with contextlib.suppress(Exception):
                value.close()
            if cluster is not None:
                with contextlib.suppress(Exception):
                    cluster.close()


# -- commands mentioned anywhere -----------------------------------------------------------------

def _subcommands():
    from rankwise.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    theory = sub.choices["theory"]
    tsub = next(a for a in theory._actions if a.__class__.__name__ == "_SubParsersAction")
    return set(sub.choices), set(tsub.choices)


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_cli_command_mentioned_exists(path):
    commands, theory = _subcommands()
    for block in extract_blocks(path):
        if block.lang not in ("bash", "text", "sh", "console", ""):
            continue
        for argv in shell_commands(block.code) if block.lang != "text" else \
                [ln.split() for ln in block.code.splitlines()]:
            argv = [a for a in argv if a != "$"]
            argv = [a for a in argv if not a.startswith("-")]       # options such as --debug
            if len(argv) >= 2 and argv[0] == "rankwise" and re.fullmatch(r"[a-z][a-z-]*", argv[1]):
                assert argv[1] in commands, f"{block.where}: `rankwise {argv[1]}` is not a command"
                if argv[1] == "theory" and len(argv) > 2 and re.fullmatch(r"[a-z][a-z-]*", argv[2]):
                    assert argv[2] in theory, f"{block.where}: `rankwise theory {argv[2]}` is not a command"


# -- page-specific checks ------------------------------------------------------------------------

def test_readme_starts_with_the_two_setup_commands():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = extract_blocks(REPO / "README.md")
    first = blocks[0]
    assert first.lang == "bash"
    assert [argv for argv in shell_commands(first.code)] == [["make", "demo"], ["make", "test"]]
    heading = text.index("## Set-up: two commands")
    assert heading < text.index("```bash") and text.count("## ") >= 3
    assert text.index("## Set-up: two commands") == min(m.start() for m in re.finditer(r"^## ", text, re.M))
    makefile = (REPO / "Makefile").read_text()
    for target in ("demo", "test"):
        assert re.search(rf"^{target}:", makefile, re.M), f"Makefile has no {target!r} target"


def _markdown_table(text: str, header_start: str) -> list[list[str]]:
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith(header_start))
    rows = []
    for ln in lines[i + 2:]:
        if not ln.startswith("|"):
            break
        rows.append([c.strip() for c in ln.strip().strip("|").split("|")])
    return rows


def test_loss_table_matches_the_registry():
    from rankwise.losses import REGISTRY, spec

    rows = _markdown_table((REPO / "docs" / "losses.md").read_text(encoding="utf-8"), "| name | family |")
    names = [re.match(r"`(\w+)`", r[0]).group(1) for r in rows]
    assert sorted(names) == sorted(REGISTRY), "docs/losses.md loss table differs from rankwise.losses.REGISTRY"
    assert len(names) == len(set(names))
    for (name, row) in zip(names, rows):
        s = spec(name)
        _, family, convex, lipschitz, calibration, reference = row
        assert family == s.family, name
        assert convex.split()[0] == ("yes" if s.convex else "no"), name
        expected = {True: "yes", False: "no", None: "?"}[s.order_preserving]
        assert calibration.split()[0] == expected, name
        assert lipschitz.startswith("—") == (s.lipschitz_inf is None), name
        assert reference, name


def test_metrics_page_has_every_profile():
    from rankwise.metrics import PROFILES

    rows = _markdown_table((REPO / "docs" / "metrics.md").read_text(encoding="utf-8"), "| profile |")
    listed = {re.match(r"`(\w+)`", r[0]).group(1) for r in rows}
    assert listed == set(PROFILES)


def test_theory_page_shows_the_list_length_figure():
    text = (REPO / "docs" / "theory.md").read_text(encoding="utf-8")
    assert "](img/list_length.png)" in text
    png = REPO / "docs" / "img" / "list_length.png"
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_index_links_every_page():
    text = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
    for page in sorted((REPO / "docs").glob("*.md")):
        if page.name != "index.md":
            assert f"]({page.name})" in text, f"docs/index.md does not link {page.name}"


def test_relative_links_resolve():
    for path in DOC_FILES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if target == "BENCHMARKS.md" or target.endswith("/BENCHMARKS.md"):
                continue  # generated by `make bench`; may not exist yet
            assert (path.parent / target).exists(), f"{path.relative_to(REPO)}: broken link {target}"


def test_model_signatures_on_the_models_page_are_current():
    """The constructor signatures quoted in docs/models.md equal the classes' own."""
    import ast
    import inspect

    import rankwise.models as models

    seen = set()
    for block in extract_blocks(REPO / "docs" / "models.md"):
        m = re.match(r"(\w+Ranker)\((.*)\)\s*$", block.code.strip(), re.S)
        if block.lang != "text" or m is None:
            continue
        name, args = m.groups()
        tree = ast.parse(f"def f(self, {args}): pass").body[0].args
        documented = {}
        positional = tree.args[1:]
        for arg, default in zip(positional, [None] * (len(positional) - len(tree.defaults)) + tree.defaults):
            documented[arg.arg] = ast.literal_eval(default) if default is not None else inspect.Parameter.empty
        for arg, default in zip(tree.kwonlyargs, tree.kw_defaults):
            documented[arg.arg] = ast.literal_eval(default) if default is not None else inspect.Parameter.empty
        if tree.kwarg is not None:  # e.g. **deprecated: the former parameter names
            documented[tree.kwarg.arg] = inspect.Parameter.empty
        actual = {k: p.default for k, p in inspect.signature(getattr(models, name)).parameters.items()}
        assert documented == actual, f"docs/models.md:{block.line}: {name} signature differs from the code"
        seen.add(name)
    assert {"LinearRanker", "NeuralRanker", "GBDTRanker"} <= seen


def test_cli_reference_names_every_option():
    """docs/cli.md mentions every sub-command and every option of `rankwise ... --help`."""
    import argparse

    from rankwise.cli.main import build_parser

    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")

    def walk(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    assert f"rankwise {' '.join(path + [name])}" in text, f"docs/cli.md: no `rankwise {name}`"
                    walk(sub, path + [name])
            else:
                for opt in action.option_strings:
                    if opt.startswith("--") and opt not in ("--help",):
                        assert re.search(re.escape(opt) + r"\b", text), \
                            f"docs/cli.md does not mention `{opt}` of `rankwise {' '.join(path)}`"

    walk(build_parser(), [])
