"""Training history kept on a fitted model (``model.history_``)."""
from __future__ import annotations


class History(dict):
    """A dict of equal-length lists, one entry per epoch / boosting round / solver iteration.

    ``history["loss"][i]`` is the training objective after step ``i`` and, when an eval set was
    given, ``history["ndcg@10"][i]`` (the metric's name) its validation value. JSON-able, so it is
    saved with the model.
    """

    def record(self, **values) -> None:
        n = len(next(iter(self.values()))) if self else 0
        for key, value in values.items():
            if key not in self:
                self[key] = [None] * n
            self[key].append(None if value is None else float(value))
        for key in self:
            if key not in values:
                self[key].append(None)

    def __len__(self) -> int:  # number of recorded steps, not of keys
        return len(next(iter(self.values()))) if dict.__len__(self) else 0

    def to_dict(self) -> dict:
        return {k: list(v) for k, v in self.items()}
