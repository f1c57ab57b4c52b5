"""What the three formats' generators share: edge values, a JSON form for cases (bytes,
NaN and infinities included, so a shrunk case prints and reloads), and equality that tells
NaN, -0.0 and 0.0 apart as a reader would.
"""

from __future__ import annotations

import base64
import json
import math
import random
import struct
from decimal import Decimal
from typing import Any

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
UNICODE = ["", "a", "é", "日本語", "🎉", "a\u0301", "\x00", "\u2028", "z" * 40, "Ωmega 🚀 \t\n"]
SPECIAL_FLOATS = [0.0, -0.0, float("nan"), float("inf"), float("-inf"), 1.0, -1.5]


def pick_int(rng: random.Random, lo: int, hi: int) -> int:
    """An int in [lo, hi]: the bounds, zero, one off them, or anything between."""
    edges = [lo, hi, lo + 1, hi - 1, 0, 1, -1]
    edges = [e for e in edges if lo <= e <= hi]
    if rng.random() < 0.4:
        return rng.choice(edges)
    if rng.random() < 0.5:
        return rng.randint(max(lo, -1000), min(hi, 1000))
    return rng.randint(lo, hi)


def pick_float(rng: random.Random, single: bool) -> float:
    """A double, or a float32 value exactly (``single``)."""
    r = rng.random()
    if r < 0.35:
        value = rng.choice(SPECIAL_FLOATS + ([3.4028234663852886e38, 1.401298464324817e-45]
                                             if single else [1.7976931348623157e308, 5e-324]))
    elif r < 0.6:
        value = float(rng.randint(-1000, 1000)) / 8
    else:
        value = rng.uniform(-1e6, 1e6) * 10 ** rng.randint(-30, 30)
    if single and math.isfinite(value):
        try:
            value = struct.unpack("<f", struct.pack("<f", value))[0]
        except OverflowError:
            value = float("inf") if value > 0 else float("-inf")
    return value


def pick_string(rng: random.Random) -> str:
    if rng.random() < 0.6:
        return rng.choice(UNICODE)
    return "".join(rng.choice("abcXYZ019 _-é日🎉") for _ in range(rng.randint(0, 12)))


def pick_bytes(rng: random.Random, size: int | None = None) -> bytes:
    n = size if size is not None else rng.choice([0, 1, 2, 5, 16])
    return bytes(rng.randrange(256) for _ in range(n))


# --- a JSON form of cases ------------------------------------------------------------------

def dumps(value: Any) -> str:
    """Compact JSON of a case, bytes, Decimals and non-finite floats tagged."""
    return json.dumps(_tag(value), separators=(",", ":"), ensure_ascii=False)


def loads(text: str) -> Any:
    return _untag(json.loads(text))


def _tag(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode()}
    if isinstance(value, float) and not math.isfinite(value):
        return {"$float": repr(value)}
    if isinstance(value, float) and value == 0 and math.copysign(1, value) < 0:
        return {"$float": "-0.0"}
    if isinstance(value, Decimal):
        return {"$decimal": str(value)}
    if isinstance(value, tuple):
        return {"$tuple": [_tag(v) for v in value]}
    if isinstance(value, list):
        return [_tag(v) for v in value]
    if isinstance(value, dict):
        return {k: _tag(v) for k, v in value.items()}
    return value


def _untag(value: Any) -> Any:
    if isinstance(value, list):
        return [_untag(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1:
            (key, inner), = value.items()
            if key == "$bytes":
                return base64.b64decode(inner)
            if key == "$float":
                return float(inner)
            if key == "$decimal":
                return Decimal(inner)
            if key == "$tuple":
                return tuple(_untag(v) for v in inner)
        return {k: _untag(v) for k, v in value.items()}
    return value


# --- equality as a reader sees it -----------------------------------------------------------

def same(a: Any, b: Any) -> bool:
    """Deep equality where NaN equals NaN and -0.0 differs from 0.0 (bools are not ints)."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (bytes, bytearray)) and isinstance(b, (bytes, bytearray)):
        return bytes(a) == bytes(b)
    return type(a) is type(b) and a == b


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where ``a`` and ``b`` first differ (``same``'s rules), or None."""
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        for k in a:
            found = first_difference(a[k], b[k], f"{path}.{k}")
            if found:
                return found
        return None
    if (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b)):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None
    if same(a, b):
        return None
    return f"{path or 'value'}: {_short(a)} != {_short(b)}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 120 else text[:117] + "..."
