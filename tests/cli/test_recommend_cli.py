"""The command line on MovieLens folders of every layout: train/predict/evaluate on the per-user time
split (sampled or full-catalogue test lists), and ``rankwise recommend`` (top-k as of now)."""
from __future__ import annotations

import numpy as np
import pytest

from rankwise.cli import main
from rankwise.data import read_trec_run


def write_latest_folder(folder, seed=0, n_users=25, n_items=160):
    """A MovieLens "latest" folder as GroupLens writes it (ratings.csv with half stars, Unix times;
    movies.csv with CSV-quoted titles holding commas, "(no genres listed)"), CRLF line endings."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    genres = ["Action", "Comedy", "Drama", "Film-Noir", "Sci-Fi"]
    item_ids = np.sort(rng.choice(np.arange(1, 200_000), size=n_items, replace=False))
    lines = ["movieId,title,genres"]
    for k, i in enumerate(item_ids):
        g = [x for x in genres if rng.random() < 0.3]
        title = f'"Film {k}, The ({1950 + k})"' if k % 3 == 0 else f"Film {k} ({1950 + k})"
        lines.append(f"{i},{title},{'|'.join(g) if g else '(no genres listed)'}")
    (folder / "movies.csv").write_bytes(("\r\n".join(lines) + "\r\n").encode())
    rows = ["userId,movieId,rating,timestamp"]
    popular = rng.random(n_items) ** 2
    for u in range(1, n_users + 1):
        n = int(rng.integers(8, 20))
        chosen = rng.choice(n_items, size=n, replace=False, p=(popular + 0.05) / (popular + 0.05).sum())
        times = np.sort(rng.integers(1_100_000_000, 1_500_000_000, size=n))
        for j, t in zip(chosen, times):
            rows.append(f"{u},{item_ids[j]},{rng.integers(1, 11) / 2:.1f},{t}")
    (folder / "ratings.csv").write_bytes(("\r\n".join(rows) + "\r\n").encode())
    return folder


def test_latest_layout_train_predict_evaluate_recommend(tmp_path, capsys):
    from rankwise.data.movielens import load_movielens
    from rankwise.data.recsys import recommendation_data, serving_data
    from rankwise.metrics import evaluate
    from rankwise.models import load

    ml_dir = write_latest_folder(tmp_path / "ml-latest-small")
    model = tmp_path / "m.npz"
    assert main(["train", str(ml_dir), "--valid", str(ml_dir), "--model", "linear", "--param", "max_iter=20",
                 "--out", str(model)]) == 0
    ml = load_movielens(ml_dir)
    train, sampled = recommendation_data(ml.ratings, ml.items, test_fraction=0.2, n_negatives=100, random_state=0)
    _, full = recommendation_data(ml.ratings, ml.items, test_fraction=0.2, n_negatives=100, test_negatives="all",
                                  random_state=0)
    m = load(model)
    assert m.n_features_in_ == train.n_features
    for split, ds in (("time", sampled), ("time-full", full)):
        scores = tmp_path / f"{split}.scores"
        assert main(["predict", str(model), str(ml_dir), "--split", split, "--out", str(scores)]) == 0
        got = np.loadtxt(scores)
        np.testing.assert_array_equal(got, m.predict(ds.X, qid=ds.qid))
        capsys.readouterr()
        assert main(["evaluate", str(ml_dir), "--split", split, "--scores", str(scores),
                     "--metrics", "ndcg@10"]) == 0
        printed = float(capsys.readouterr().out.split()[1])
        want = evaluate(got, ds.labels, ds.qid, metrics=["ndcg@10"]).mean["ndcg@10"]
        assert printed == pytest.approx(want, abs=5e-7)
    assert len(full) > len(sampled)
    # recommend after the last rating: top 5 unrated items per user, scored as the model scores them
    run = tmp_path / "recs.run"
    assert main(["recommend", str(model), str(ml_dir), "--top", "5", "--out", str(run)]) == 0
    assert "top 5 per user" in capsys.readouterr().out
    recs = read_trec_run(run)
    now = serving_data(ml.ratings, ml.items)
    s = m.predict(now.X, qid=now.qid)
    rated = set(zip(ml.ratings.user.tolist(), ml.ratings.item.tolist()))
    assert len(recs) == now.n_queries == 25
    for u, docs in recs.items():
        assert len(docs) == 5
        rows = now.qid == int(u)
        best = np.sort(s[rows])[::-1][:5]
        np.testing.assert_allclose(sorted(docs.values(), reverse=True), best, rtol=0, atol=0)
        assert not any((int(u), int(d)) in rated for d in docs)
    # as of an earlier time, for two users: ratings from then on are not seen
    t = int(np.median(ml.ratings.timestamp))
    assert main(["recommend", str(model), str(ml_dir), "--as-of", str(t), "--users", "3,7", "--out", str(run)]) == 0
    recs = read_trec_run(run)
    assert sorted(recs) == ["3", "7"]
    then = serving_data(ml.ratings, ml.items, as_of=t, users=[3, 7])
    for u, docs in recs.items():
        rows = then.qid == int(u)
        assert set(docs) <= set(then.doc_ids[rows].tolist())


def test_movielens_cli_errors(tmp_path, capsys):
    ml_dir = write_latest_folder(tmp_path / "ml-latest-small")
    assert main(["train", str(ml_dir), "--split", "u1", "--model", "linear", "--out", str(tmp_path / "m.npz")]) == 2
    assert "no official split; use --split time or time-full" in capsys.readouterr().err
    assert main(["train", str(ml_dir), "--split", "later", "--model", "linear", "--out", str(tmp_path / "m.npz")]) == 2
    assert "--split must be one of" in capsys.readouterr().err
    from rankwise.data import make_synthetic
    from rankwise.models import LinearRanker

    other = LinearRanker(max_iter=300).fit(make_synthetic(10, n_features=5, seed=0))
    other.save(tmp_path / "other.npz")
    assert main(["recommend", str(tmp_path / "other.npz"), str(ml_dir), "--out", str(tmp_path / "r.run")]) == 2
    err = capsys.readouterr().err
    assert "takes 5 features" in err and "--split time" in err
    assert main(["recommend", str(tmp_path / "other.npz"), str(ml_dir), "--top", "0", "--out", "r.run"]) == 2
    assert "--top must be a positive integer" in capsys.readouterr().err
    assert main(["recommend", str(tmp_path / "other.npz"), str(ml_dir), "--users", "3,x", "--out", "r.run"]) == 2
    assert "--users must be comma-separated integer user ids" in capsys.readouterr().err


def test_write_trec_run_depth(tmp_path):
    """depth keeps the first documents of each query in trec_eval's order (ties: docno descending)."""
    from rankwise.data import write_trec_run
    from rankwise.errors import InputError

    run = {"1": {"a": 0.5, "b": 2.5e-3, "c": 0.5, "d": 1.0000000000000002}, "2": {"x": -1e-300}}
    write_trec_run(run, tmp_path / "r.run", depth=2)
    lines = (tmp_path / "r.run").read_text().splitlines()
    assert [ln.split()[2] for ln in lines] == ["d", "c", "x"]
    assert [ln.split()[3] for ln in lines] == ["1", "2", "1"]
    assert read_trec_run(tmp_path / "r.run")["1"] == {"d": 1.0000000000000002, "c": 0.5}
    for bad in (0, -3, 2.5, True):
        with pytest.raises(InputError, match="depth must be a positive integer"):
            write_trec_run(run, tmp_path / "r.run", depth=bad)


def test_time_split_memo_follows_the_content_not_size_and_mtime(tmp_path):
    """The CLI memoises the MovieLens time split; a ratings file swapped for another of the same
    size and mtime (issue 29 item 4) gives the new split, not the memoised one."""
    import os

    from rankwise.cli.inputs import movielens_split

    folder = write_latest_folder(tmp_path / "ml", seed=0)
    first, _ = movielens_split(folder, "time")
    ratings = folder / "ratings.csv"
    st = ratings.stat()
    # another file of the same size: the high ratings turned low
    other = ratings.read_bytes().replace(b",5.0,", b",0.5,").replace(b",4.5,", b",1.5,")
    assert len(other) == st.st_size and other != ratings.read_bytes()
    ratings.write_bytes(other)
    os.utime(ratings, ns=(st.st_atime_ns, st.st_mtime_ns))
    second, _ = movielens_split(folder, "time")
    assert not np.array_equal(first.labels, second.labels)
