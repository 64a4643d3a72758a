"""Import helper: the naive references of tests/reference/theory_reference.py."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
import theory_reference as ref  # noqa: E402,F401
