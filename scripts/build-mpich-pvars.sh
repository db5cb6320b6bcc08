#!/bin/sh
# Build MPICH from Debian's source package with the receive-queue MPI_T performance variables
# (--enable-mpit-pvars=recvq: posted/unexpected queue lengths, match attempts, time spent
# matching), install it into .mpi/mpich-pvars. The wheels expose no pvar that counts items
# searched; this instrumented library does (docs/methodology.md, "MPI_T performance variables").
#
# Usage: scripts/build-mpich-pvars.sh            (then: hmb build --mpi mpich-pvars)
# Environment: JOBS (make -j, default 2), NICE (default 19), SUITE (Debian suite, default bookworm).
#
# The source comes through apt-get with a private configuration (a deb-src entry in the work
# directory): the machine's apt sources are left as they are. ch3:nemesis keeps matching in
# MPICH's own queues (no libfabric to build, no offloaded matching that the counters cannot see).
set -eu

REPO=$(cd "$(dirname "$0")/.." && pwd)
PREFIX=${PREFIX:-$REPO/.mpi/mpich-pvars}
WORK=${WORK:-$REPO/.mpi/src/mpich-pvars}
JOBS=${JOBS:-2}
NICE=${NICE:-19}
SUITE=${SUITE:-bookworm}

for tool in apt-get dpkg-source gcc make; do
    command -v "$tool" >/dev/null 2>&1 || { echo "build-mpich-pvars: $tool not found (needs a Debian-like system)" >&2; exit 2; }
done

mkdir -p "$WORK/apt/lists/partial" "$WORK/apt/cache/archives/partial" "$WORK/src"
cat >"$WORK/apt/sources.list" <<SOURCES
deb-src http://deb.debian.org/debian $SUITE main
SOURCES
APT_OPTS="-o Dir::Etc::SourceList=$WORK/apt/sources.list -o Dir::Etc::SourceParts=/nonexistent
 -o Dir::State::Lists=$WORK/apt/lists -o Dir::Cache=$WORK/apt/cache -o APT::Sandbox::User=root"

start=$(date +%s)
cd "$WORK/src"
if ! ls -d mpich-*/ >/dev/null 2>&1; then
    echo "build-mpich-pvars: fetching Debian's mpich source package ($SUITE)"
    # shellcheck disable=SC2086
    apt-get $APT_OPTS -q update >/dev/null
    # shellcheck disable=SC2086
    apt-get $APT_OPTS -q source mpich
fi
SRC=$(ls -d "$WORK"/src/mpich-*/ | head -n 1)
echo "build-mpich-pvars: source $SRC"

cd "$SRC"
if [ ! -f config.status ]; then
    echo "build-mpich-pvars: configure (log: $WORK/configure.log)"
    nice -n "$NICE" ./configure --prefix="$PREFIX" --enable-mpit-pvars=recvq --with-device=ch3:nemesis \
        --disable-fortran --disable-cxx --disable-romio --disable-doc --disable-dependency-tracking \
        >"$WORK/configure.log" 2>&1 || { echo "build-mpich-pvars: configure failed, see $WORK/configure.log" >&2; exit 1; }
fi
echo "build-mpich-pvars: make -j$JOBS (log: $WORK/make.log)"
nice -n "$NICE" make -j"$JOBS" >"$WORK/make.log" 2>&1 || { echo "build-mpich-pvars: make failed, see $WORK/make.log" >&2; exit 1; }
nice -n "$NICE" make install >"$WORK/install.log" 2>&1 || { echo "build-mpich-pvars: make install failed, see $WORK/install.log" >&2; exit 1; }
echo "build-mpich-pvars: installed into $PREFIX in $(( $(date +%s) - start )) s"
