"""torch for the loss modules, imported by the first call that uses it (``import rankwise.losses``
and a GBDT fit on the compiled engine never load it).

``torch = deferred("torch", globals())`` binds a stand-in; its first attribute access imports the
module and rebinds the global to the module itself, so later calls pay nothing. Nothing is put in
``sys.modules`` before the real import (libraries that look there for torch see no torch).
"""
from __future__ import annotations

import importlib


class _Deferred:
    __slots__ = ("_name", "_namespace", "_alias")

    def __init__(self, name: str, namespace: dict, alias: str):
        self._name, self._namespace, self._alias = name, namespace, alias

    def __getattr__(self, attr: str):
        module = importlib.import_module(self._name)
        if self._namespace.get(self._alias) is self:
            self._namespace[self._alias] = module
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<{self._name}, imported on first use>"


def deferred(name: str, namespace: dict, alias: str | None = None):
    """A stand-in for module ``name`` bound in ``namespace`` as ``alias`` (default: ``name``)."""
    return _Deferred(name, namespace, alias or name)
