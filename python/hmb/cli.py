"""The `hmb` command line: build, run, sweep, report, compare, slurm, demo."""
from __future__ import annotations

import argparse
import sys

from . import __version__, mpi


def cmd_build(args) -> int:
    impl = mpi.find(args.mpi)
    path = mpi.build(impl, quiet=not args.verbose)
    print(path)
    return 0


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hmb", description="HMB: Hybrid MPI Benchmarks")
    p.add_argument("--version", action="version", version=f"hmb {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    b = sub.add_parser("build", help="install the MPI if needed and build hmb-bench for it")
    b.add_argument("--mpi", default="mpich", choices=mpi.KNOWN)
    b.add_argument("-v", "--verbose", action="store_true")
    b.set_defaults(func=cmd_build)
    return p


def main(argv=None) -> int:
    args = make_parser().parse_args(argv)
    try:
        return args.func(args)
    except mpi.MPIError as e:
        print(f"hmb: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
