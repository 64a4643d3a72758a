"""What every ``fit_ddp`` rank needs, loaded once in the fork server the ranks are forked from.

Imported by :mod:`multiprocessing`'s fork server (``set_forkserver_preload``), never by rankwise's
own code: torch, ``torch.distributed``, the losses and the rankers; and what torch itself loads the first
time an optimizer is built (``torch.optim.Optimizer.__init__`` imports ``torch._dynamo``, about
1.5 CPU s on its own). A rank forked from the server starts with all of it in memory instead of
importing it again (about 4.5 CPU s per rank when each rank was a fresh interpreter).

Nothing here runs a parallel region: an OpenMP pool created before ``fork`` is not safe in the
children. Building one optimizer over a one-element parameter touches no thread pool.
"""
import torch
import torch.distributed

import rankwise.distributed.ddp
import rankwise.losses
import rankwise.models

PRELOADED = (torch.distributed, rankwise.distributed.ddp, rankwise.losses, rankwise.models)

torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))])
