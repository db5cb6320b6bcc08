# Spack recipe for HMB (Hybrid MPI Benchmarks). Copy into a Spack package repository as
# packages/hmb/package.py (docs/toolkit.md, "Installing hmb-bench"). The project has no
# published release tarball yet: build from a checkout with `spack dev-build hmb@0.1.0` run in
# the source tree (or `spack develop`), which uses the local sources instead of fetching.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

try:  # Spack >= 1.0: the build systems live in the builtin package repository
    from spack_repo.builtin.build_systems.cmake import CMakePackage
except ImportError:  # Spack < 1.0: they come with spack.package
    pass

from spack.package import *


class Hmb(CMakePackage):
    """HMB (Hybrid MPI Benchmarks): micro-benchmarks for MPI communication in the many-core era:
    partitioned point-to-point (MPI 4.0), MPI + threads, asynchronous progress and overlap,
    eager/rendezvous behaviour and multithreaded matching. One executable, hmb-bench, run under
    mpiexec or srun like osu_latency or IMB-MPI1, plus libhmbprof.so, a PMPI profiler."""

    homepage = "https://example.org/hmb"  # replace with the project's page when published
    # No release is published yet: a mirror serves hmb/hmb-0.1.0.tar.gz (`git archive
    # --prefix=hmb-0.1.0/` of a checkout; `spack install --no-checksum hmb`), or `spack dev-build`.
    url = "https://example.org/hmb/hmb-0.1.0.tar.gz"

    maintainers()
    license("MIT")

    version("0.1.0")

    variant(
        "openmp",
        default=True,
        description="OpenMP threads per rank (every threaded benchmark needs it)",
    )
    # The threaded benchmarks and the per-thread compute calibration are OpenMP code; there is
    # no build without it. Say so at concretisation rather than fail in CMake.
    conflicts("~openmp", msg="hmb-bench requires OpenMP (find_package(OpenMP REQUIRED))")

    depends_on("c", type="build")
    depends_on("cmake@3.18:", type="build")
    depends_on("mpi")
    depends_on("llvm-openmp", when="+openmp %apple-clang")

    def cmake_args(self):
        return [
            self.define("MPI_C_COMPILER", self.spec["mpi"].mpicc),
            self.define("CMAKE_BUILD_TYPE", "Release"),
        ]

    def _mpiexec(self):
        for name in ("mpiexec", "mpirun", "srun"):
            exe = which(join_path(self.spec["mpi"].prefix.bin, name)) or which(name)
            if exe:
                return exe
        raise SkipTest("no mpiexec, mpirun or srun found for the MPI this package was built with")

    def test_list(self):
        """hmb-bench --list names the baseline benchmark p2p"""
        hmb_bench = which(self.prefix.bin.join("hmb-bench"))
        out = hmb_bench("--list", output=str.split, error=str.split)
        assert "p2p" in out

    def test_p2p_two_ranks(self):
        """2-rank ping-pong with tiny sizes, results validated byte by byte by the harness"""
        mpiexec = self._mpiexec()
        hmb_bench = self.prefix.bin.join("hmb-bench")
        out = mpiexec(
            "-n", "2", hmb_bench, "p2p", "--mode", "latency", "--sizes", "8,1K",
            "--iters", "20", "--ci-target", "0",
            output=str.split, error=str.split,
        )
        assert "latency_us" in out
