"""A launch's log, read for why it failed: hmb-bench's own error line, else the timeout, the
signal or the last line (log_reason). hmb sweep writes each launch's output to FILE.log beside
its results (`### TIME TAG: COMMAND` above each launch) and says why a launch failed from it;
the results reader says from it why a file holds no result (failed_launches)."""
from __future__ import annotations

import collections
import re
import signal
from pathlib import Path


def own_line(text: str) -> str | None:
    """hmb-bench's own last error line in a launch's output (not a warning, not the launcher's
    banner after it), or None."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    own = [ln[ln.index("hmb-bench"):] for ln in lines
           if re.search(r"(^|\W)hmb-bench( [a-z0-9_]+)?: (?!warning:)", ln)]
    return own[-1][:200] if own else None


_RULE = re.compile(r"^[-=*#_]{3,}$")     # a help box's rule (Open MPI's, PRRTE's): not a reason


def last_said(text: str) -> str:
    """The launcher's or library's last message in text, in one line: the last help box whole
    (its first and last line: Open MPI frames its help texts in rules of dashes, and exits with a
    status such as 213, "error already reported", so the rule alone says nothing), else the
    last line that is not a rule; "" when there is none."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    rules = [i for i, ln in enumerate(lines) if _RULE.match(ln)]
    if len(rules) >= 2:
        body = lines[rules[-2] + 1:rules[-1]]
        if body and rules[-1] >= len(lines) - 3:     # the box is the end of what was said
            return body[0] if len(body) == 1 else f"{body[0]} ... {body[-1]}"
    said = [ln for ln in lines if not _RULE.match(ln)]
    return said[-1] if said else ""


def log_reason(text: str, rc: int, timeout: float = 0) -> str:
    """failure_reason of one launch's part of the log, given as text."""
    own = own_line(text)
    if own:
        return own
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if rc == 124:
        return f"killed after the {timeout:g} s timeout"
    sig = -rc if rc < 0 else rc - 128 if 128 < rc < 160 else 0
    if sig:
        try:
            return f"ended by {signal.Signals(sig).name}" + (f" ({last_said(text)[:120]})" if lines else "")
        except ValueError:
            pass
    return last_said(text)[:300] or "no output"


def failed_launches(path: Path, records: list) -> str | None:
    """When a sweep's every launch failed (its file holds launch records, no run header): one
    line saying so, how many, and why (hmb-bench's own line from the sweep's log, the most
    common reason first); None otherwise."""
    last = {}
    for r in records:
        if r.get("type") == "launch":
            last[r.get("tag")] = r
    failed = [r for r in last.values() if r.get("status") != "done"]
    if not failed or len(failed) < len(last):
        return None
    log = path.with_name(path.name + ".log")
    why = collections.Counter(launch_failure(log, r) for r in failed)
    reasons = "; ".join(f"{n} × {w}" if len(failed) > 1 else w for w, n in why.most_common(2))
    more = f"; {len(why) - 2} other reasons" if len(why) > 2 else ""
    return (f"{path}: all {len(failed)} launch{'es' if len(failed) != 1 else ''} failed, no results: "
            f"{reasons}{more} (each launch's output: {log})")


def launch_failure(log: Path, launch: dict) -> str:
    """Why a launch failed: from its part of the sweep's log (log_reason), else its exit status."""
    rc = launch.get("rc")
    rc = rc if isinstance(rc, int) and not isinstance(rc, bool) else 1
    if rc == 124:
        return "killed by the launch timeout"
    try:
        with open(log, "rb") as f:
            text = f.read()
    except OSError:
        return f"exit {rc}"
    headers = list(re.finditer(rb"^### [^\n]* " + re.escape(str(launch.get("tag")).encode("utf-8", "replace"))
                               + rb": [^\n]*\n", text, re.MULTILINE))
    if not headers:
        return f"exit {rc}"
    start = headers[-1].end()
    end = text.find(b"\n### ", start)
    return f"exit {rc}: {log_reason(text[start:end if end >= 0 else len(text)].decode('utf-8', 'replace'), rc)}"
