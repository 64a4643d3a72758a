"""The TREC scanner's own decimal conversion (``data/_decimal.pxd``: Clinger's fast path, then
Eisel-Lemire up to 18 significant digits) next to the halfway points between doubles, where a wrong
rounding would show: every score of the run equals ``float()`` of its token, bit for bit, and most of
them are decided by the compiled conversion, not left to the ``float()`` fallback.
"""
from __future__ import annotations

import decimal
import math

import numpy as np

from rankwise.data import _trec_kernel as TK
from rankwise.data.trec import Run


def _tokens():
    rng = np.random.default_rng(23)
    values = np.abs(rng.normal(size=3000)) * 10.0 ** rng.integers(-320, 308, size=3000)
    tokens = ["9007199254740993", "9007199254740995", "1e23", "8.98846567431158e307", "1.7976931348623157e308",
              "2.2250738585072014e-308", "2.2250738585072011e-308", "4.9e-324", "123456789012345678e-5",
              "0.000000000000000000000000000001234567890123456789", "-0.0", "7e-10", "1e22", "12345e-22"]
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        for v in values.tolist():
            if v == 0 or not math.isfinite(v):
                continue
            mid = (decimal.Decimal(v) + decimal.Decimal(math.nextafter(v, math.inf))) / 2  # exact halfway point
            tokens += [repr(v), f"{v:.16e}", f"{mid:.16e}", f"{mid:.17e}", f"-{mid:.15e}", f"{mid:.17e}".upper()]
    return tokens


def test_scores_next_to_halfway_points_are_pythons_float(tmp_path):
    tokens = _tokens()
    text = "".join(f"{301 + i % 5} Q0 d{i} {i + 1} {tok} sys\n" for i, tok in enumerate(tokens))
    path = tmp_path / "run.txt"
    path.write_text(text)
    run = Run.read(path)
    got = dict(zip(run.docs.strings(), run.scores.tolist()))
    bad = [tok for i, tok in enumerate(tokens) if got[f"d{i}"].hex() != float(tok).hex()]
    assert not bad, bad[:5]
    # the compiled conversion decided most of them (the rest: float() of the token, as above)
    raw = path.read_bytes()
    err, _, n, *_, n_fb, _, _ = TK.scan(np.frombuffer(raw, dtype=np.uint8), 1, raw.count(b"\n") + 1, TK._POW10)
    assert err == TK.OK and n == len(tokens)
    assert n_fb < 0.1 * len(tokens), n_fb
