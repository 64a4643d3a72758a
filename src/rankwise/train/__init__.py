"""Training machinery shared by the models: optimisers, minibatches of queries, early stopping,
history, checkpoints and progress bars. torch is imported only inside the functions using it."""
from rankwise.train.batching import gather_padded, query_batches
from rankwise.train.early_stopping import EarlyStopping, resolve_metric
from rankwise.train.history import History
from rankwise.train.optim import make_averaged_ogd, minimize_erm
from rankwise.train.progress import Progress, progress_enabled

__all__ = ["EarlyStopping", "History", "Progress", "gather_padded", "make_averaged_ogd", "minimize_erm",
           "progress_enabled", "query_batches", "resolve_metric"]
