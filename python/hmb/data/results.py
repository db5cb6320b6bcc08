"""Reading and writing results records: JSON Lines files as hmb-bench and hmb write them
(docs/output-schema.md), a line at a time.

Readers ignore unknown keys and unknown record types. A launch that was redone after an
interruption (`hmb sweep --resume`) leaves two runs with the same tag in its file; only the
last one counts, so a point is never counted twice. Several files are several data sets:
tags and run ids are scoped to their file, and a file named twice is read once.

This module knows records, not points: what a point is (its identity), its value over its
launches and every table made of results are the tidy table's (hmb.data.tidy).
"""
from __future__ import annotations

import collections
import dataclasses
import errno
import hashlib
import json
import math
import os
import re
import sys
from pathlib import Path

from . import descriptors, launchlog


DEFAULT_SETTINGS = "default"   # a sweep's `settings` entry that sets no library variable


class ResultsError(Exception):
    """A one-line problem with a results file (exit status 2)."""


@dataclasses.dataclass
class Result:
    record: dict
    run: dict           # its run header ({} if missing)
    launch: dict        # the driver's launch record ({} outside sweeps)
    source: str
    desc: descriptors.Bench | None = None   # the benchmark's descriptor, when known

    @property
    def bench(self) -> str:
        return self.record.get("bench") or self.run.get("bench", "?")

    @property
    def params(self) -> dict:
        return dict(self.record.get("params") or {})

    @property
    def status(self) -> str:
        return self.record.get("status", "ok")

    @property
    def mpi(self) -> str:
        return mpi_label(self.run, self.launch)

    @property
    def settings(self) -> str:
        """The `settings` entry a sweep launched this run with (library variables; see
        settings.py); "default" when none was set or outside sweeps."""
        return str((self.launch.get("point") or {}).get("settings", DEFAULT_SETTINGS))

    @property
    def oversubscribed(self) -> bool:
        """The run's ranks x threads outnumber a node's CPUs, or this point's own threads do
        (extra `oversubscribed_threads`: match's low-cost emulator runs one thread per emulated
        neighbour thread)."""
        return bool(self.run.get("oversubscribed")) or \
            bool((self.record.get("extra") or {}).get("oversubscribed_threads"))

    @property
    def progress_shares_core(self) -> bool | None:
        """Whether its progress thread ran on a core the compute uses (None: no progress thread
        recorded)."""
        shares = (self.record.get("extra") or {}).get("progress_shares_compute_core")
        return None if shares is None else bool(shares)

    @property
    def noise(self) -> str:
        n = self.run.get("noise")
        if isinstance(n, dict):
            return str(n.get("model", "none"))
        opts = self.run.get("options") or {}
        return str(opts.get("noise", "none"))

    def metric(self, name: str) -> dict | None:
        """The metric's summary; a CI hmb-bench marked invalid (ci_valid false: it wrote
        [min, max] there) reads as no CI (NaN bounds)."""
        m = (self.record.get("metrics") or {}).get(name)
        if m is None:
            v = (self.record.get("extra") or {}).get(name)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return {"median": float(v), "ci_lo": float("nan"), "ci_hi": float("nan")}
        elif m.get("ci_valid") is False:
            m = {**m, "ci_lo": float("nan"), "ci_hi": float("nan")}
        return m



def mpi_label(run: dict, launch: dict | None = None) -> str:
    m = run.get("mpi") or {}
    impl = m.get("impl")
    if impl and impl != "unknown":
        return impl
    if launch and launch.get("mpi"):
        return str(launch["mpi"])
    lib = m.get("library")
    return lib.split(",")[0].strip() if lib else "unknown MPI"


MAX_WARNINGS = 5   # bad lines named one by one per file; the rest are counted


# The longest line a reader takes: a record with --raw samples of every metric (10^5 iterations,
# hmb-bench's default --max-iters) is a few MB to some tens of MB. A longer line is a bad line,
# skipped without holding it (a file without line ends, binary data).
MAX_LINE_BYTES = 256 << 20
_CHUNK = 1 << 20


def _skip_line(f) -> int:
    """Read past the rest of the current line (to the byte after its LF, or the end) without
    holding it; returns the bytes skipped. A stretch of the file that is a hole (a sparse file:
    it reads as NULs, never a line end) is jumped over, so a 20 GB sparse file of NULs is passed
    at once instead of read."""
    skipped = 0
    while True:
        chunk = f.read1(_CHUNK) if hasattr(f, "read1") else f.read(_CHUNK)
        if not chunk:
            return skipped
        at = chunk.find(b"\n")
        if at >= 0:
            f.seek(at + 1 - len(chunk), os.SEEK_CUR)
            return skipped + at + 1
        skipped += len(chunk)
        if not chunk.strip(b"\0") and hasattr(os, "SEEK_DATA"):
            here = f.tell()
            data = _next_data(f.fileno(), here)
            if data is None:    # nothing but a hole up to the end
                end = os.fstat(f.fileno()).st_size
                f.seek(max(end, here))
                return skipped + max(0, end - here)
            if data > here:
                f.seek(data)
                skipped += data - here


def _next_data(fd: int, offset: int) -> int | None:
    """Where the file's next data (not a hole) starts at or after offset; None: none up to the
    end; offset itself when the file system cannot say. The descriptor's own position is kept
    (a buffered reader sits on it)."""
    pos = os.lseek(fd, 0, os.SEEK_CUR)
    try:
        return os.lseek(fd, offset, os.SEEK_DATA)
    except OSError as e:
        return None if e.errno == errno.ENXIO else offset
    finally:
        os.lseek(fd, pos, os.SEEK_SET)


def lines(f, max_line: int = MAX_LINE_BYTES):
    """(line number, bytes, None) for each line of a binary file object, read one at a time
    (bounded memory: at most one line of max_line bytes), or (line number, None, why) for a line
    that is not read: one holding a NUL byte (binary data, a sparse or preallocated file) or
    longer than max_line. A byte-order mark at the start is left out."""
    n = 0
    while True:
        n += 1
        raw = f.readline(_CHUNK)
        if not raw:
            return
        if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if raw.endswith(b"\n") or len(raw) < _CHUNK:
            yield n, raw, None
            continue
        # a long line: gather it piece by piece, as long as it may still be a record
        pieces, size, why = [raw], len(raw), None
        while True:
            if b"\0" in pieces[-1]:
                why = "a NUL byte (binary data, or a sparse or preallocated file?)"
            elif size > max_line:
                why = f"a line longer than {max_line >> 20} MB (no line end: not JSON Lines?)"
            if why:
                pieces = None
                if not raw.endswith(b"\n"):
                    _skip_line(f)
                break
            raw = f.readline(_CHUNK)
            if not raw:
                break
            pieces.append(raw)
            size += len(raw)
            if raw.endswith(b"\n"):
                break
        if why:
            yield n, None, why
        else:
            yield n, b"".join(pieces), None


def iter_records(path: Path, bad: list | None = None, samples: bool = True):
    """(line number, record) for every well-formed record of a JSON Lines file, read one line at
    a time (results.lines). Each line that is not one (cut short, binary, a NUL byte, not UTF-8,
    nested too deeply, a JSON value that is not an object, a record whose fields have the wrong
    types) is appended to `bad` as "FILE:LINE: why" and skipped. A byte-order mark at the start
    is allowed. samples False: --raw samples are left out of each record once it is checked."""
    problem = file_problem(path)
    if problem:
        raise ResultsError(f"results file not found: {path}" if problem == "no such file"
                           else f"{path}: {problem}")
    bad = [] if bad is None else bad
    try:
        with open(path, "rb") as f:
            for n, raw, why in lines(f):
                problem, rec = (why, None) if why else parse_line(raw)
                raw = None
                if problem:
                    bad.append(f"{path}:{n}: {problem}")
                elif rec is not None:
                    if not samples:
                        rec.pop("samples", None)
                    yield n, rec
    except OSError as e:
        raise ResultsError(f"cannot read {path}: {e.strerror}") from None


def read_records(path: Path, bad: list | None = None, samples: bool = True):
    """iter_records as a list."""
    return list(iter_records(path, bad, samples))


# Lines that may hold a number Python cannot use as a double (a run of 20 digits, a 3-digit
# exponent) or a lone surrogate escape: only these take the slower checks of decode().
_NUMBER_SHAPE = bytes.maketrans(b"123456789E-", b"000000000e+")   # digits as 0, e, signs as +
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
BLANK = object()                  # decode()'s value for a blank line
JSON_WHITESPACE = " \t\r\n"   # RFC 8259's; str.strip() would also eat U+2028 and friends
MAX_INT_DIGITS = 20               # an unsigned 64-bit integer; hmb-bench writes nothing longer


class _NotANumber(ValueError):
    """A number token decode() refuses (its message is the bad line's reason)."""


def _constant(name: str):
    raise _NotANumber(f"{name} is not a JSON number (hmb-bench writes null for a value it has not got)")


def _finite_float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise _NotANumber(f"the number {text[:24]}{'...' if len(text) > 24 else ''} is beyond a double's range")
    return v


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _NotANumber(f"an integer of {digits} digits (more than 64 bits)")
    return int(text)


def _lone_surrogate(value) -> str | None:
    """The first string (or key) of a decoded value holding a lone surrogate, escaped."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return v.encode("utf-8", "backslashreplace").decode("ascii", "replace")[:40]
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return None


def decode(data: bytes) -> tuple[str | None, object]:
    """(problem, value) of one JSON text: the one decoder of hmb's JSON readers (this module's
    records, `hmb validate`, hmb.load), so they agree on every line. A line is refused, with
    the reason, for: a NUL byte, bytes that are not UTF-8 (latin-1 text too), what is not JSON
    (records separated by CR alone included), NaN or Infinity (not JSON; hmb-bench writes
    null), a number beyond a double's range or an integer beyond 64 bits, a lone surrogate in a
    string (not Unicode text: it could not be written out again), and nesting too deep.
    (None, BLANK) for a blank line. A U+2028 inside a string is text like any other."""
    if b"\0" in data:
        return "a NUL byte (binary data, or UTF-16 text?)", None
    try:
        text = data.decode("utf-8").strip(JSON_WHITESPACE)
    except UnicodeDecodeError as e:
        return (f"not UTF-8 text (byte 0x{data[e.start]:02x} at column {e.start + 1}: binary data, or "
                "latin-1 text?)"), None
    if not text:
        return None, BLANK
    hooks = {"parse_constant": _constant}
    shape = data.translate(_NUMBER_SHAPE)
    if b"0" * MAX_INT_DIGITS in shape or b"e000" in shape or b"e+000" in shape:
        hooks.update(parse_float=_finite_float, parse_int=_bounded_int)
    try:
        value = json.loads(text, **hooks)
    except RecursionError:
        return "JSON nested too deeply", None
    except _NotANumber as e:
        return f"not JSON: {e}", None
    except json.JSONDecodeError as e:
        hint = ("; records separated by CR alone? JSON Lines ends each with LF" if "\r" in text
                else "; a line cut short?")
        where = f"line {e.lineno} column {e.colno}" if e.lineno > 1 else f"column {e.colno}"
        return f"not JSON ({e.msg} at {where}{hint})", None
    except ValueError as e:   # anything else the decoder refuses, in one line
        return f"not JSON ({str(e).splitlines()[0][:120]})", None
    if _SURROGATE_ESCAPE.search(data):
        try:
            bad = _lone_surrogate(value)
        except RecursionError:
            return "JSON nested too deeply", None
        if bad is not None:
            return f"a lone surrogate in a string ('{bad}'): not Unicode text", None
    return None, value


def parse_line(raw: bytes) -> tuple[str | None, dict | None]:
    """(problem, record) of one line; (None, None) for a blank line."""
    problem, rec = decode(raw)
    if problem or rec is BLANK:
        return problem, None
    if not isinstance(rec, dict):
        return f"a JSON {type(rec).__name__.replace('dict', 'object')}, not a record (an object)", None
    try:
        problem = _malformed(rec)
    except RecursionError:
        problem = "JSON nested too deeply"
    return problem, rec


_SAMPLE_TYPES = frozenset((int, float, type(None)))


def only_numbers(values: list) -> bool:
    """Every item a number or null (not a bool): a --raw samples list, at C speed (10^5 and
    more items per metric)."""
    return set(map(type, values)) <= _SAMPLE_TYPES


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _malformed(rec: dict) -> str | None:
    """What is wrong with the types of a run or result record (None if nothing)."""
    kind = rec.get("type")
    if kind is not None and not isinstance(kind, str):
        return "'type' must be text"
    for key in ("run_id", "tag", "bench"):
        if rec.get(key) is not None and not isinstance(rec[key], str):
            return f"{kind or 'record'} record: '{key}' must be text"
    if kind == "launch":
        if rec.get("point") is not None and not isinstance(rec["point"], dict):
            return "launch record: 'point' must be an object"
    if kind == "run":
        hosts = rec.get("hosts")
        if hosts is not None and not (isinstance(hosts, list) and all(isinstance(h, str) for h in hosts)):
            return "run record: 'hosts' must be a list of host names"
        for key in ("options", "thread_level", "mpi", "noise"):
            if key in rec and not isinstance(rec[key], (dict, type(None))):
                return f"run record: '{key}' must be an object"
        for key, fields in (("mpi", ("impl", "library")), ("thread_level", ("provided", "requested")),
                            ("noise", ("model",))):
            for field in fields:
                v = (rec.get(key) or {}).get(field)
                if v is not None and not isinstance(v, str):
                    return f"run record: {key}.{field} must be text"
        for key in ("ranks", "threads", "ranks_per_node", "cpus_available"):
            if rec.get(key) is not None and not _is_number(rec[key]):
                return f"run record: '{key}' must be a number"
        placement = rec.get("placement")
        if placement is not None and not (isinstance(placement, list) and all(isinstance(p, dict) for p in placement)):
            return "run record: 'placement' must be a list of objects"
    elif kind == "result":
        params = rec.get("params")
        if params is None:
            return "result record: no 'params'"
        for key in ("status", "reason"):
            if rec.get(key) is not None and not isinstance(rec[key], str):
                return f"result record: '{key}' must be text"
        if not isinstance(params, dict):
            return "result record: 'params' must be an object"
        for k, v in (params or {}).items():
            if isinstance(v, (dict, list)):
                return f"result record: params.{k} must be a number or text"
        if params and "size_bytes" in params and not (isinstance(params["size_bytes"], int)
                                                      and not isinstance(params["size_bytes"], bool)):
            return "result record: params.size_bytes must be an integer"
        for key in ("metrics", "samples", "extra"):
            if key in rec and not isinstance(rec[key], (dict, type(None))):
                return f"result record: '{key}' must be an object"
        for name, m in (rec.get("metrics") or {}).items():
            if not isinstance(m, dict):
                return f"result record: metric '{name}' must be an object"
            for field in ("median", "ci_lo", "ci_hi"):
                if m.get(field) is not None and not _is_number(m[field]):
                    return f"result record: {name}.{field} must be a number"
        for name, s in (rec.get("samples") or {}).items():
            if not isinstance(s, list) or not only_numbers(s):
                return f"result record: samples.{name} must be a list of numbers"
    return None


def file_problem(path) -> str | None:
    """Why a path is no file to read (None when it is a regular file, links followed): no such
    file, a symbolic link loop or to nothing, a directory, a FIFO or device (reading one would
    block)."""
    try:
        st = os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "a symbolic link loop"
        if os.path.islink(path):
            return f"a symbolic link to nothing ({os.readlink(path)})"
        return "no such file" if e.errno == errno.ENOENT else (e.strerror or str(e))
    if os.path.isdir(path):
        return "a directory, not a file"
    return None if os.path.isfile(path) else "not a regular file (a FIFO or a device?)"


def _files(paths, skipped: list) -> list[Path]:
    """The files named (a directory: its *.jsonl), each once, in the order given. A file of a
    directory that cannot be read (a link loop, a link to nothing, a FIFO) is named in
    `skipped` as "FILE:0: why"; a file named itself is read (read_records names its problem)."""
    files, seen = [], set()
    for p in map(Path, paths):
        found = [p]
        if p.is_dir():
            found = sorted(p.glob("*.jsonl"))
            if not found:
                raise ResultsError(f"no *.jsonl files in {p}")
            for f in [f for f in found if file_problem(f)]:
                skipped.append(f"{f}:0: {file_problem(f)}")
                found.remove(f)
            if not found:
                raise ResultsError(f"{skipped[-1]} (and no other *.jsonl file in {p})")
        for f in found:
            try:
                real = f.resolve(strict=True)
            except (OSError, RuntimeError):   # named by read_records
                real = f.absolute()
            if real not in seen:   # the same file twice (or a directory and a file in it)
                seen.add(real)
                files.append(f)
    return files


# A run header's fields a Result and the tidy table read (scan(slim=True) keeps only these).
_RUN_FIELDS = ("type", "schema", "run_id", "bench", "tag", "mpi", "thread_level", "ranks", "threads", "hosts",
               "oversubscribed", "spare_core_missing", "cpus_available", "noise", "options")


class _Interned:
    """One shared object per distinct value (by its JSON text): the run headers of thousands of
    launches hold the same options, library and hosts."""

    def __init__(self):
        self.known = {}

    def __call__(self, value):
        if isinstance(value, str):
            return sys.intern(value)
        if isinstance(value, (dict, list)):
            try:
                key = json.dumps(value, sort_keys=True)
            except (TypeError, ValueError, RecursionError):
                return value
            return self.known.setdefault(key, value)
        return value


def _slim_run(rec: dict, intern: _Interned) -> dict:
    out = {k: intern(rec[k]) for k in _RUN_FIELDS if k in rec}
    network = (rec.get("env") or {}).get("HMB_NETWORK") if isinstance(rec.get("env"), dict) else None
    if network:
        out["env"] = intern({"HMB_NETWORK": network})
    return out


def _slim_launch(rec: dict, intern: _Interned) -> dict:
    point = rec.get("point") if isinstance(rec.get("point"), dict) else {}
    out = {k: rec[k] for k in ("type", "tag", "status", "mpi", "rc", "attempt") if k in rec}
    out["point"] = intern({k: point[k] for k in ("bench", "mpi", "settings", "repeat") if k in point})
    return out


class ResultStream:
    """The results of files, read a line at a time (scan()): the runs, launch records, failures
    and conformance records are known once the files have been read through; iterating yields
    each result that counts (as load() would list it), reading the files once more. Memory stays
    bounded by what is kept per run and per result line (a few numbers), not by the files."""

    def __init__(self, warn, samples: bool, slim: bool):
        self.warn = sys.stderr if warn is True else warn
        self.samples, self.slim = samples, slim
        self.runs, self.launches, self.failures, self.conformance = {}, [], [], []
        self.sources, self.bad_lines, self.duplicates = [], [], 0
        self.descriptors = dict(descriptors.local())
        self.files = []     # (path, kept result lines, their run ids, runs, launches by tag)
        self.kinds = {}     # (bench, param) -> Counter(is number) over the results that count
        self.count = 0      # results that count (before the mixed-types check)
        self._said = False
        self._named = set()     # (file, line) of results already named as bad lines

    def __iter__(self):
        for path, kept, runs, launches in self.files:
            want = iter(kept)
            nxt = next(want, None)
            for n, rec in iter_records(path, [], samples=self.samples):
                while nxt is not None and nxt[0] < n:
                    nxt = next(want, None)
                if nxt is None:
                    break
                if nxt[0] != n or rec.get("type") != "result":
                    continue
                _, run_id, sweep_no = nxt
                run = runs.get(run_id, {})
                tag = run.get("tag")
                r = Result(rec, run, launches.get((sweep_no, tag), {}) if tag else {}, str(path))
                if self._mixed(n, r):
                    continue
                r.desc = self.descriptors.get(r.bench)
                yield r

    def _mixed(self, n: int, r: Result) -> bool:
        """A result whose param is text where the benchmark's other results have numbers (or the
        other way round) cannot be ordered with them: the minority kind is a bad line."""
        for k, v in r.params.items():
            kinds = self.kinds.get((r.bench, k))
            if kinds and len(kinds) > 1 and kinds[_is_number(v)] <= kinds[not _is_number(v)]:
                if (r.source, n) in self._named:
                    return True
                self._named.add((r.source, n))
                self.bad_lines.append(f"{r.source}:{n}: params.{k} is {'a number' if _is_number(v) else 'text'}"
                                      f" ({v!r}) where other {r.bench} results have "
                                      f"{'text' if _is_number(v) else 'numbers'}")
                return True
        return False

    def say_bad_lines(self) -> None:
        """Name the unreadable lines on `warn` (once all results have been read)."""
        if self._said or not self.bad_lines or not self.warn:
            return
        self._said = True
        for line in self.bad_lines[:MAX_WARNINGS]:
            print(f"hmb: skipped {line}", file=self.warn)
        more = len(self.bad_lines) - MAX_WARNINGS
        print(f"hmb: {len(self.bad_lines)} unreadable lines skipped{f' ({more} more not shown)' if more > 0 else ''};"
              f" every readable record is used", file=self.warn)

    def _index(self, path: Path) -> None:
        """The first pass over one file: what every result needs, and which result lines count."""
        intern = _Interned()
        file_bad = []
        file_runs, file_launches, last_run_of_tag = {}, {}, {}
        items = []       # (line, sweep number, run id, param kinds) of each result line
        seen, sweep_no, file_dups, readable = set(), 0, 0, False
        for n, rec in iter_records(path, file_bad, samples=False):
            kind = rec.get("type")
            readable = readable or kind in ("run", "result", "conformance")
            try:
                # --raw samples (10^5 and more numbers) are left out of the comparison: a
                # record's summaries tell it apart, and the encoding took seconds
                digest = hashlib.blake2b(json.dumps(rec, sort_keys=True).encode("utf-8", "surrogatepass"),
                                         digest_size=16).digest()
            except (RecursionError, ValueError):
                digest = None
            if digest is not None and digest in seen:
                file_dups += kind in ("run", "result", "launch", "failure")
                continue
            seen.add(digest)
            if kind == "sweep" and not rec.get("resume"):
                sweep_no += 1     # tags repeat across sweeps of one config: scope them
            if kind == "run":
                run_id = rec.get("run_id")
                file_runs[run_id] = _slim_run(rec, intern) if self.slim else rec
                if rec.get("tag"):
                    last_run_of_tag[(sweep_no, rec["tag"])] = run_id
            elif kind == "launch":
                file_launches[(sweep_no, rec.get("tag"))] = _slim_launch(rec, intern) if self.slim else rec
            elif kind == "result":
                params = rec.get("params") or {}
                sig = intern([[rec.get("bench") or "", k, _is_number(v)] for k, v in params.items()])
                items.append((n, sweep_no, intern(rec.get("run_id")) if isinstance(rec.get("run_id"), str)
                              else rec.get("run_id"), sig))
            elif kind == "failure":
                self.failures.append(rec)
            elif kind == "conformance":
                self.conformance.append(rec)
            elif kind == "descriptors":
                try:
                    self.descriptors.update(descriptors.parse_obj(rec))
                except descriptors.DescriptorError as e:
                    raise ResultsError(f"{path}:{n}: descriptors record: {e}") from None
        seen = None
        self.bad_lines += file_bad
        if not readable:
            if file_bad:
                raise ResultsError(f"{file_bad[0]} (and no readable hmb-bench record in the file"
                                   f"{f'; {len(file_bad)} bad lines' if len(file_bad) > 1 else ''})")
            raise ResultsError(launchlog.failed_launches(path, list(file_launches.values()))
                               or f"{path}: no hmb-bench records (is it a JSON Lines results file?)")
        kept, sweep_of_run = [], {}
        for n, sweep_at, run_id, sig in items:
            run = file_runs.get(run_id, {})
            tag = run.get("tag")
            sweep_no = sweep_of_run.setdefault(run_id, sweep_at)
            if tag and last_run_of_tag.get((sweep_no, tag)) != run_id:
                continue  # superseded by a redone launch of the same tag
            kept.append((n, run_id, sweep_no))
            for bench, k, is_num in sig:
                self.kinds.setdefault((bench, k), collections.Counter())[is_num] += 1
        self.count += len(kept)
        self.runs.update({(str(path), run_id): run for run_id, run in file_runs.items()})
        self.launches += file_launches.values()
        self.duplicates += file_dups
        if file_dups and self.warn:
            print(f"hmb: {path}: {file_dups} duplicate records (identical to earlier lines) read once",
                  file=self.warn)
        self.files.append((path, kept, file_runs, file_launches))


def scan(paths, warn=True, samples=False, slim=True) -> ResultStream:
    """Read results files (a directory means every *.jsonl in it) a line at a time: the
    ResultStream knows the runs, launch records, failures and bad lines, and yields the results
    that count, reading the files again (load() lists them). slim: keep only the run header
    fields a Result and the tidy table read (hmb export: a file of many launches)."""
    stream = ResultStream(warn, samples, slim)
    files = _files(paths, stream.bad_lines)
    stream.sources = [str(f) for f in files]
    for path in files:
        stream._index(path)
    return stream
