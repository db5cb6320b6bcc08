"""Durations as the user writes them: a number with a unit (500ms, 30s, 2min); 0 alone needs none."""
from __future__ import annotations

import math
import re

_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}
_DURATION = re.compile(r"[ \t]*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)[ \t]*([a-zµ]*)[ \t]*")


def parse_duration(value) -> float:
    """Seconds from "30s", "1.5min", "250ms"; 0 (or "0") means none. A bare number other than
    0 is refused: "600" could be seconds or microseconds (hmb-bench reads bare numbers as µs).
    Raises ValueError with a one-line reason."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration (write e.g. 30s)")
    if isinstance(value, (int, float)):
        if value == 0:
            return 0.0
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{value} is not a finite duration")
        raise ValueError(f"{value:g} has no unit (write e.g. {value:g}s or {value:g}min)")
    m = _DURATION.fullmatch(str(value))
    if not m:
        shown = str(value) if str(value).isprintable() else ascii(str(value))[1:-1]
        raise ValueError(f"'{shown[:60]}' is not a duration (write e.g. 30s, 500ms, 2min)")
    value = value.strip() if isinstance(value, str) else value
    number, unit = float(m.group(1)), m.group(2)
    if not unit:
        if number == 0:
            return 0.0
        raise ValueError(f"'{value}' has no unit (write e.g. {m.group(1)}s or {m.group(1)}min)")
    if unit not in _SECONDS:
        raise ValueError(f"'{value}': unknown unit '{unit}' (use ns, us, ms, s, min or h)")
    seconds = number * _SECONDS[unit]
    if not math.isfinite(seconds):
        raise ValueError(f"'{value}' is not a finite duration")
    return seconds
