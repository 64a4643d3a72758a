"""Reference evaluators: each serving engine's parser and scorer restated in Python (no engine runs here).

One module per engine (``opensearch``, ``solr``): what the engine's parser accepts (the others raise
:class:`EngineRejection` with the engine's own message) and how it scores a feature vector.
"""
from rankwise.errors import InputError


class EngineRejection(InputError):
    """The engine's parser would reject this definition; the message is the engine's."""
