"""Files hmb writes: never over one of the command's inputs, never over a file of another kind,
never half-written.

Every writer of a whole file (hmb export --csv, hmb slurm -o, hmb check --json, hmb compare -o,
hmb advise --json) checks its output first (check_output): a FIFO, a device or a directory is
refused (a FIFO blocked the writer for ever), so is a file that is one of the command's inputs
(hmb export --csv r.jsonl r.jsonl replaced the results with their CSV) and, unless --force, an
existing file of another kind hmb knows (results, a sweep config, a study, a CSV hmb export
wrote, an sbatch script, a check record) than the one the command writes. Then it writes through
write_atomic: a temporary file beside the output, renamed over it once complete and synced, so a
full disk leaves the old file as it was and the error names the file. Appending writers (a
sweep's results, hmb-bench --json) check their output the same way and cut a half-written record
off again (sweep.append_record).
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:   # Python < 3.11
    import tomli as tomllib

from .results import BLANK, decode

# What an existing file is, by its first bytes (kind_of); a writer replaces only its own kind
# (or a file hmb does not know) without --force.
KINDS = {
    "results": "an HMB results file (JSON Lines)",
    "config": "a sweep config (TOML)",
    "study": "a study (TOML)",
    "toml": "a TOML file",
    "csv": "a CSV table hmb export wrote",
    "script": "a script",
    "check": "an hmb check record",
    "advise": "an hmb advise record",
    "json": "a JSON document",
}
SNIFF_BYTES = 1 << 20


class OutputError(Exception):
    """A one-line problem with an output file (exit status 2)."""


def _shown(path) -> str:
    text = os.fsdecode(path)
    return text if text.isprintable() else ascii(text)[1:-1]


def kind_of(path) -> str | None:
    """What an existing regular file holds, by its first MB: a key of KINDS, "empty", or None
    (something hmb does not know: text, a binary, a spreadsheet)."""
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES + 1)
    except OSError:
        return None
    if not head.strip():
        return "empty"
    if head.startswith(b"#!"):
        return "script"
    text = head.lstrip(b"\xef\xbb\xbf")
    first = next((ln for ln in text.split(b"\n") if ln.strip()), b"")
    problem, value = decode(first)
    if problem is None and isinstance(value, dict) and value is not BLANK:
        kind = value.get("type")
        if kind in ("check", "advise"):
            return kind
        return "results" if isinstance(kind, str) or "benchmarks" in value else "json"
    if first.lstrip().startswith(b'{"') and len(head) > SNIFF_BYTES and b"\n" not in text.strip():
        return "results"    # a first record longer than what is read of it (--raw samples)
    if first.strip().startswith((b"{", b"[")) and len(head) <= SNIFF_BYTES:
        problem, value = decode(text)
        if problem is None and isinstance(value, dict):
            return value.get("type") if value.get("type") in ("check", "advise") else "json"
    if first.startswith(b"bench,metric,"):
        return "csv"
    if len(head) <= SNIFF_BYTES:
        try:
            data = tomllib.loads(text.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError):
            return None
        if not data:
            return None
        if "study" in data:
            return "study"
        return "config" if "sweep" in data or "bench" in data else "toml"
    return None


def _same(a: str, b) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def _inputs(inputs) -> list:
    """The input files named, a directory standing for its *.jsonl (the readers' rule)."""
    out = []
    for p in inputs or ():
        if p is None:
            continue
        p = Path(os.fsdecode(p))
        try:
            out += sorted(p.glob("*.jsonl")) if p.is_dir() else [p]
        except OSError:
            out.append(p)
    return out


def check_output(path, flag: str, writes: str, inputs=(), force: bool = False, makes_dirs: bool = False) -> None:
    """Refuse, in one OutputError line, an output that is no regular file (a FIFO, a device, a
    directory), one of the command's inputs, or (without force) an existing file of another kind
    than `writes` (a key of KINDS). '-' (standard output) is always fine. makes_dirs: the writer
    makes a missing directory (a sweep's output), so only a file in its way is refused."""
    if path in (None, "-"):
        return
    shown = _shown(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OutputError(f"{flag} {shown}: a symbolic link loop") from None
        if e.errno == errno.ENOTDIR:
            raise OutputError(f"{flag} {shown}: a part of the path is not a directory") from None
        raise OutputError(f"{flag} {shown}: {e.strerror}") from None
    except ValueError:
        raise OutputError(f"{flag} {shown}: not a file name (a NUL byte)") from None
    parent = os.path.dirname(os.path.abspath(path))
    if st is None:
        if os.path.islink(path):
            return      # a link to a file yet to be written: written through the link
        up = parent
        while makes_dirs and not os.path.exists(up) and os.path.dirname(up) != up:
            up = os.path.dirname(up)
        if not os.path.isdir(up):
            raise OutputError(f"{flag} {shown}: no directory {_shown(up)}")
        return
    if stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{flag} {shown}: is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        what = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "a device"
        raise OutputError(f"{flag} {shown}: {what}, not a file (hmb writes regular files only)")
    for inp in _inputs(inputs):
        if _same(path, inp):
            raise OutputError(f"{flag} {shown}: is also an input of this command ({_shown(inp)}): writing it "
                              f"would replace what is read; give another file")
    if force or st.st_size == 0:
        return
    kind = kind_of(path)
    if kind not in (None, "empty", writes):
        raise OutputError(f"{flag} {shown}: holds {KINDS.get(kind, kind)}, not {KINDS.get(writes, writes)}: "
                          f"give another file, or --force to replace it")


def _mode_for(target: str, executable: bool) -> int:
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return (0o777 if executable else 0o666) & ~umask
    return mode | (mode & 0o444) >> 2 if executable else mode   # a script: runnable by whoever reads it


@contextlib.contextmanager
def write_atomic(path, flag: str = "", text: bool = True, executable: bool = False, newline: str | None = None):
    """A file object to write `path` through: a temporary file beside it, synced and renamed over
    it when the body ends, removed when the body fails. A failed write (a full disk) is one
    OutputError naming the file; the old file, if any, is as it was. A symbolic link is written
    through (its target replaced). The file keeps the old file's permissions (new: 0666, 0777
    when executable, less the umask)."""
    target = os.path.realpath(path)
    shown = _shown(path)
    where = f"{flag} {shown}" if flag else shown
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp",
                                   dir=os.path.dirname(target))
    except OSError as e:
        raise OutputError(f"cannot write {where}: {e.strerror}") from None
    try:
        f = os.fdopen(fd, "w" if text else "wb", **({"encoding": "utf-8", "newline": newline} if text else {}))
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    try:
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _mode_for(target, executable))
        os.replace(tmp, target)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        old = " (the old file is unchanged)" if os.path.exists(target) else ""
        raise OutputError(f"cannot write {where}: {e.strerror or e}{old}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text(path, data: str, flag: str = "", executable: bool = False) -> None:
    """write_atomic with the whole text at once."""
    with write_atomic(path, flag, executable=executable) as f:
        f.write(data)


def write_json(path, value, flag: str = "") -> None:
    write_text(path, json.dumps(value, indent=1) + "\n", flag)


def write_file(path: Path, content: str | bytes) -> None:
    """Write a file (of a study directory: study.md, config.toml, rounds.json) as a new file that
    replaces the old one (os.replace): a symbolic link there is replaced, never written through (a
    study.md linked to a file outside the directory was overwritten there)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8") if isinstance(content, str) else content
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
