"""Flattening torch state (module and optimiser) into JSON + numpy arrays for pickle-free files."""
from __future__ import annotations

import numpy as np


def module_state_to_arrays(module, prefix: str = "module/") -> dict[str, np.ndarray]:
    return {prefix + k: v.detach().cpu().numpy().copy() for k, v in module.state_dict().items()}


def arrays_to_module_state(arrays: dict, prefix: str = "module/"):
    import torch

    return {k[len(prefix):]: torch.from_numpy(np.array(v)) for k, v in arrays.items() if k.startswith(prefix)}


def optimizer_state(optimizer, prefix: str = "opt/") -> tuple[dict, dict[str, np.ndarray]]:
    """``optimizer.state_dict()`` as (JSON-able dict, arrays)."""
    import torch

    sd = optimizer.state_dict()
    arrays, scalars = {}, {}
    for pid, st in sd["state"].items():
        for key, val in st.items():
            if isinstance(val, torch.Tensor):
                arrays[f"{prefix}{pid}/{key}"] = val.detach().cpu().numpy().copy()
            else:
                scalars.setdefault(str(pid), {})[key] = val
    groups = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()} for g in sd["param_groups"]]
    return {"param_groups": groups, "scalars": scalars}, arrays


def load_optimizer_state(optimizer, meta: dict, arrays: dict, prefix: str = "opt/") -> None:
    import torch

    state: dict = {}
    for name, arr in arrays.items():
        if not name.startswith(prefix):
            continue
        pid, key = name[len(prefix):].split("/", 1)
        state.setdefault(int(pid), {})[key] = torch.from_numpy(np.array(arr))
    for pid, st in meta.get("scalars", {}).items():
        state.setdefault(int(pid), {}).update(st)
    groups = []
    for g, cur in zip(meta["param_groups"], optimizer.state_dict()["param_groups"]):
        g = dict(g)
        for k, v in cur.items():  # keep tuple-typed hyperparameters (betas) as tuples
            if isinstance(v, tuple) and isinstance(g.get(k), list):
                g[k] = tuple(g[k])
        groups.append(g)
    optimizer.load_state_dict({"state": state, "param_groups": groups})
