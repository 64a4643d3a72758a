"""``rankwise trec_eval``: trec_eval's own command line, its output line for line.

A trec_eval command line works after replacing the program name::

    rankwise trec_eval -q -c -M 1000 -m map -m P.5,10 -m ndcg_cut.10 qrels.txt run.txt

Options as trec_eval 10 reads them (getopt: ``-mmap``, ``-l2``, ``-qc``, long names such as
``--measure=map``, options after the files): ``-m`` (repeatable; ``name.params`` with cutoffs
such as ``P.5,10``; the groups ``official``, the default, ``all_trec`` and ``set``), ``-q``,
``-c``, ``-n``, ``-l``, ``-M``, ``-J``, ``-N``. The measures print in trec_eval's order (its
measure table, whatever the order of the ``-m`` options), a measure's cutoffs sorted; the
first parameters given for a measure are the ones used. What rankwise does not compute (trec_eval's
preference measures, ``dcg``, the ``_avgjg`` measures, parameters of ``ndcg``/``rbp``/``utility``
and the other measures with non-cutoff parameters, ``-D``, ``-Z``, other ``-R``/``-T`` formats) is
refused with an error naming it.

As trec_eval 10, a judged topic the run lacks is an error unless ``-c`` (``rankwise evaluate``
leaves such topics out, as trec_eval 9 does).
"""
from __future__ import annotations

import argparse
import os
import sys

#: trec_eval 10 measures and groups rankwise does not compute
_NOT_COMPUTED = {"dcg", "ideal_dcg", "yaap", "map_avgjg", "P_avgjg", "Rprec_mult_avgjg", "prefs", "all_prefs",
                 "qrels_jg"}
#: trec_eval measures whose parameters are not cutoffs (gains, utility weights, beta, persistence)
_OTHER_PARAMS = {"11pt_avg", "set_F", "utility", "G", "Rndcg", "ndcg", "ndcg_rel", "rbp", "rbp_resid"}
#: options of trec_eval rankwise refuses, and the value of -R / -T that is rankwise's own format
_REFUSED = {"-D": "debug output", "-Z": "z-scores", "-o": "the old output format", "-v": "version",
            "-R": "qrels", "-T": "trec_results"}


class _Refused(argparse.Action):
    """Records a trec_eval option rankwise does not support (refused after parsing, by name)."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.refused.append((self.option_strings[0], option_string, values if self.nargs != 0 else None))


def add_trec_eval_parser(sub) -> None:
    p = sub.add_parser("trec_eval", help="trec_eval's command line and output: rankwise trec_eval [-q] "
                                         "[-m measure]... QRELS RUN",
                       description="trec_eval 10's command line, its output line for line "
                                   "(see docs/trec_eval.md).")
    p.add_argument("qrels", help="TREC qrels file (plain or .gz)")
    p.add_argument("run", help="TREC run file (plain or .gz)")
    p.add_argument("-m", "--measure", action="append", default=[], metavar="MEASURE",
                   help="measure[.params] or group (official, all_trec, set); repeatable; default official")
    p.add_argument("-q", "--query_eval_wanted", action="count", default=0, help="per-topic values too")
    p.add_argument("-c", "--complete_rel_info_wanted", action="count", default=0,
                   help="average over every judged topic, a topic the run lacks scoring 0")
    p.add_argument("-n", "--nosummary", action="count", default=0, help="no summary lines")
    p.add_argument("-l", "--level_for_rel", type=int, default=1, metavar="N", help="grades >= N are relevant")
    p.add_argument("-M", "--Max_retrieved_per_topic", type=int, metavar="N", help="the first N documents only")
    p.add_argument("-J", "--Judged_docs_only", action="count", default=0, help="drop unjudged documents")
    p.add_argument("-N", "--Number_docs_in_coll", type=int, default=0, metavar="N", help="collection size (utility)")
    from rankwise.cli._options import add_allow_truncated

    add_allow_truncated(p)  # rankwise's own: trec_eval reads a file cut short without a word
    p.set_defaults(refused=[], func=_cmd_trec_eval)
    for short, long_, nargs in (("-D", "--Debug_level", None), ("-R", "--Rel_info_format", None),
                                ("-T", "--Results_format", None), ("-Z", "--Zscore", None),
                                ("-o", "--Output_old_results_format", 0), ("-v", "--version", 0)):
        p.add_argument(short, long_, action=_Refused, nargs=nargs, help=argparse.SUPPRESS)


def _measure_plan(measure_args):
    """trec_eval's ``-m`` arguments -> (measure specs in trec_eval's print order, runid wanted)."""
    from rankwise.errors import InputError
    from rankwise.metrics.registry import get_metric
    from rankwise.metrics.trec import GROUPS, STRING_MEASURES, expand_groups, relstring_length

    table: dict[str, list[str]] = {"runid": []}  # trec_eval's measure table: base -> default specs
    for spec in expand_groups("all_trec", strings=True):
        base = "relstring" if relstring_length(spec) else get_metric(spec).trec_base
        table.setdefault(base, []).append(spec)
    marked, params = set(), {}
    for arg in measure_args or ["official"]:
        name, dot, par = arg.partition(".")
        if dot and not par:
            raise InputError(f"-m {arg!r}: no parameters after '.'; expected e.g. -m P.5,10")
        if dot:
            params.setdefault(name, par)  # trec_eval uses the first parameters given for a measure
        if name in GROUPS:
            extra = STRING_MEASURES.get(name, (None, []))[1]
            marked |= {"runid", *extra, *(b for b, specs in table.items() if set(specs) & set(GROUPS[name]))}
        elif name in table:
            marked.add(name)
        elif name in _NOT_COMPUTED or name.startswith("prefs_"):
            raise InputError(f"-m {arg!r}: rankwise does not compute trec_eval's {name!r} (preference and "
                             "jg-qrels measures, dcg, ideal_dcg, yaap)")
        else:
            raise InputError(f"-m {arg!r}: illegal measure {name!r}; trec_eval's measures: {', '.join(table)} and "
                             f"the groups {', '.join(GROUPS)}")
    specs = []
    for base, defaults in table.items():
        if base not in marked or base == "runid":
            continue
        par = params.get(base)
        if par is not None and base == "relstring":
            if not (par.isascii() and par.isdigit() and int(par) >= 1):
                raise InputError(f"-m relstring.{par}: the length must be an integer >= 1, as in relstring.20")
            specs.append(f"relstring_{int(par)}")
        elif par is None or defaults == [base]:
            if par is not None and base in _OTHER_PARAMS:
                raise InputError(f"-m {base}.{par}: rankwise trec_eval takes {base} with trec_eval's default "
                                 "parameters only")
            specs.extend(defaults)  # measures without parameters ignore them, as in trec_eval
        else:
            specs.extend(_cutoffs(base, par, get_metric(defaults[0]).entry.fraction))
    return specs, "runid" in marked


def _cutoffs(base: str, par: str, fraction: bool) -> list[str]:
    """``P.10,5`` -> ``["P_5", "P_10"]``: trec_eval sorts the cutoffs and refuses duplicates."""
    from rankwise.errors import InputError

    values = []
    for text in par.split(","):
        try:
            v = float(text) if fraction else int(text)
        except ValueError:
            v = None
        if v is None or v < (0 if fraction else 1) or not text.isascii():
            what = "numbers >= 0" if fraction else "integers >= 1"
            raise InputError(f"-m {base}.{par}: the cutoffs must be {what} separated by commas; got {text!r}")
        values.append(v)
    values.sort()
    if len(set(values)) != len(values):
        raise InputError(f"-m {base}.{par}: duplicate cutoffs (trec_eval refuses them too)")
    if fraction:
        import numpy as np

        return [f"{base}_{np.format_float_positional(v)}" for v in values]
    return [f"{base}_{v}" for v in values]


def _cmd_trec_eval(args) -> int:
    from rankwise.data.trec import Qrels, Run
    from rankwise.errors import InputError
    from rankwise.metrics import evaluate_runs, format_trec_eval
    from rankwise.metrics.trec import PreparedQrels

    for short, given, value in args.refused:
        if short in ("-R", "-T") and value == _REFUSED[short]:
            continue  # trec_eval's default formats: qrels and trec_results
        what = f"only '{_REFUSED[short]}' is read" if short in ("-R", "-T") else f"{_REFUSED[short]} is not offered"
        raise InputError(f"trec_eval option {given}{'' if value is None else ' ' + str(value)} is not supported by "
                         f"rankwise trec_eval ({what})")
    specs, runid = _measure_plan(args.measure)
    pq = PreparedQrels(Qrels.read(args.qrels, allow_truncated=args.allow_truncated))
    run = Run.read(args.run, allow_truncated=args.allow_truncated)
    if not args.complete_rel_info_wanted:
        in_run = set(run.qids)
        missing = sorted(q for q in pq.qrels.qids if q not in in_run)
        if missing:  # trec_eval 10 stops there (exit 4)
            raise InputError(f"{args.run}: judged topic {missing[0]!r} is not in the run ({len(missing)} such "
                             "topics); trec_eval 10 stops here too: use -c to score them as empty rankings, or "
                             "`rankwise evaluate` to leave them out")
    name = os.path.basename(str(args.run))
    results = evaluate_runs(pq, {name: run}, specs, complete=bool(args.complete_rel_info_wanted),
                            relevance_level=args.level_for_rel, max_docs=args.Max_retrieved_per_topic,
                            judged_only=bool(args.Judged_docs_only), n_docs_in_coll=args.Number_docs_in_coll)
    format_trec_eval(results, specs + ["runid"] * runid, per_query=bool(args.query_eval_wanted),
                     summary=not args.nosummary, file=sys.stdout)
    return 0
