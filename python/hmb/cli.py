"""The `hmb` command's entry point (the console script, `python -m hmb.cli`): hmb.commands holds
the parser and every command. They are imported inside main(), so that a Ctrl-C while hmb's
modules load is hmb's one line and exit status 130, not Python's traceback.

Every user error is one line "hmb: ..." on stderr and exit status 2.
"""
from __future__ import annotations

import sys


def _tolerant_streams() -> None:
    """stdout and stderr write what their encoding cannot hold as escapes (PYTHONIOENCODING=ascii,
    a C locale without UTF-8): a study's author with an accent in their name made hmb study list
    a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure") and (stream.errors or "strict") == "strict":
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass


def main(argv=None) -> int:
    """The hmb command; a Ctrl-C at any moment (start-up included: the imports, the parser) is
    one line and exit status 130."""
    try:
        _tolerant_streams()
        from . import commands   # inside the guard: a Ctrl-C while hmb's modules load is one line
        return commands.run(argv)
    except KeyboardInterrupt:
        print("hmb: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
