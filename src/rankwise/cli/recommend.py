"""``rankwise recommend``: top-k recommendations after the last rating, from a MovieLens folder.

``rankwise recommend MODEL FOLDER --out RUN [--top 10] [--as-of UNIX_TIME] [--users 1,2,...]``
scores, for each user, every item the user has not rated, with the features of
:func:`rankwise.data.recsys.serving_data` computed *as of* ``--as-of`` (default: one second after
the latest rating), and writes the ``--top`` best of each user as a TREC run
(``user Q0 item rank score tag``). MODEL is a model trained on the same folder's time-split
lists (``rankwise train FOLDER --split time``), so its features are the ones it was trained on.
"""
from __future__ import annotations


def add_recommend_parser(sub) -> None:
    p = sub.add_parser("recommend", help="top-k unrated items per user as of now (MovieLens folder; TREC run out)")
    p.add_argument("model", help="a model trained on the folder's time split (rankwise train FOLDER --split time)")
    p.add_argument("data", metavar="FOLDER", help="MovieLens folder: 100k (u.data), 1M (ratings.dat) or latest "
                                                  "(ratings.csv)")
    p.add_argument("--out", required=True, help="TREC run file: user Q0 item rank score tag")
    p.add_argument("--top", type=int, default=10, help="items per user (default 10)")
    p.add_argument("--as-of", type=int, default=None,
                   help="Unix time the features are computed at; ratings from then on are ignored "
                        "(default: one second after the latest rating)")
    p.add_argument("--users", default=None, help="comma-separated user ids (default: every user with a rating)")
    p.add_argument("--tag", default="rankwise", help="run tag (last column)")
    p.set_defaults(func=run_recommend)


def run_recommend(args) -> int:
    import numpy as np

    import rankwise
    from rankwise.data import write_trec_run
    from rankwise.data.movielens import load_movielens
    from rankwise.data.recsys import serving_data
    from rankwise.errors import InputError

    if args.top < 1:
        raise InputError(f"--top must be a positive integer; got {args.top}")
    users = None
    if args.users is not None:
        try:
            users = [int(u) for u in args.users.split(",") if u.strip()]
        except ValueError:
            raise InputError(f"--users must be comma-separated integer user ids; got {args.users!r}") from None
    model = rankwise.load(args.model)
    ml = load_movielens(args.data)
    ds = serving_data(ml.ratings, ml.items, as_of=args.as_of, users=users)
    expected = getattr(model, "n_features_in_", None)
    if expected is not None and expected != ds.n_features:
        raise InputError(f"{args.model}: the model takes {expected} features but the recommendation features of "
                         f"{args.data} are {ds.n_features}; train it on the folder's time split "
                         f"(rankwise train {args.data} --split time)")
    scores = np.asarray(model.predict(ds.X, qid=ds.qid), dtype=np.float64)
    write_trec_run(ds, args.out, scores=scores, tag=args.tag, depth=args.top)
    t = int(ml.ratings.timestamp.max()) + 1 if args.as_of is None else args.as_of
    print(f"{ds.n_queries} users, {len(ds)} unrated (user, item) pairs scored as of {t}; top {args.top} per user "
          f"written to {args.out}")
    return 0
