"""Reference evaluators: each serving engine's parser and scorer restated in Python (no engine runs here)."""
