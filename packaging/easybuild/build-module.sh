#!/usr/bin/env bash
# Build HMB as an EasyBuild module on this machine and say how to load it with Lmod
# (docs/toolkit.md, "Installing as a module").
#
#   packaging/easybuild/build-module.sh [PREFIX]        (default: build/easybuild)
#
# What a site without foss does, with this machine's parts:
#   - the sources: a `git archive` tarball of the checkout (its working tree, uncommitted
#     changes to tracked files included), HMB-0.1.0.tar.gz in EasyBuild's source path;
#   - the MPI: the MPICH wheel of `make setup` as an external module mpich/VERSION (a module file
#     written under PREFIX/extmodules, with EasyBuild's external-module metadata beside it);
#   - packaging/easybuild/HMB-0.1.0.eb (SYSTEM toolchain), its MPI dependency set to that version;
#   - eb 5.4.1 (`pip install -e '.[frameworks]'`), Lmod (Debian's `apt-get install lmod`).
# Then: module use PREFIX/modules/all PREFIX/extmodules; module load HMB/0.1.0.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
PREFIX=$(realpath -m "${1:-$REPO/build/easybuild}")
EB=${EB:-$REPO/.venv/bin/eb}
EB_PY=${EB_PY:-$REPO/.venv/bin/python3}
MPI_PREFIX=${HMB_EB_MPI_PREFIX:-$REPO/.venv}
LMOD_DIR=${LMOD_DIR:-/usr/share/lmod/lmod}

say() { echo "build-module: $*" >&2; }

[ -x "$EB" ] || { say "no eb at $EB: pip install -e '.[frameworks]' (make test-packaging does)"; exit 2; }
[ -x "$LMOD_DIR/libexec/lmod" ] || { say "no Lmod in $LMOD_DIR: apt-get install lmod (scripts/packaging-tools.sh does)"; exit 2; }
[ -x "$MPI_PREFIX/bin/mpichversion" ] || { say "no MPICH in $MPI_PREFIX: make setup"; exit 2; }

MPI_VERSION=$("$MPI_PREFIX/bin/mpichversion" | sed -n 's/^MPICH Version:[[:space:]]*//p')
[ -n "$MPI_VERSION" ] || { say "mpichversion printed no version"; exit 2; }
MPI_MODULE=mpich/$MPI_VERSION

mkdir -p "$PREFIX/sources/h/HMB" "$PREFIX/extmodules/mpich" "$PREFIX/easyconfigs"

# The checkout as a release tarball would hold it (tracked files; the working tree's state).
rev=$(git stash create 2>/dev/null || true)
git archive --prefix=HMB-0.1.0/ -o "$PREFIX/sources/h/HMB/HMB-0.1.0.tar.gz" "${rev:-HEAD}"

# The external module: the wheel's MPICH, as a site's own MPI module would provide it.
cat > "$PREFIX/extmodules/mpich/$MPI_VERSION.lua" <<EOF
help([[MPICH $MPI_VERSION from the mpich wheel in $MPI_PREFIX (an external module for EasyBuild)]])
whatis("Name: MPICH")
whatis("Version: $MPI_VERSION")
prepend_path("PATH", "$MPI_PREFIX/bin")
setenv("MPICH_ROOT", "$MPI_PREFIX")
EOF
cat > "$PREFIX/extmodules/metadata.cfg" <<EOF
[$MPI_MODULE]
name = MPICH
version = $MPI_VERSION
prefix = $MPI_PREFIX
EOF

# The easyconfig with the MPI module this machine has (the file names mpich/5.0.2).
sed -E "s|\('mpich/[^']*', EXTERNAL_MODULE\)|('$MPI_MODULE', EXTERNAL_MODULE)|" \
    packaging/easybuild/HMB-0.1.0.eb > "$PREFIX/easyconfigs/HMB-0.1.0.eb"
grep -q "'$MPI_MODULE', EXTERNAL_MODULE" "$PREFIX/easyconfigs/HMB-0.1.0.eb" \
    || { say "could not set the MPI module in the easyconfig"; exit 2; }

export EB_PYTHON=$EB_PY
export LMOD_CMD=$LMOD_DIR/libexec/lmod
export MODULEPATH=$PREFIX/extmodules
say "eb: HMB 0.1.0, SYSTEM toolchain, external module $MPI_MODULE, into $PREFIX"
"$EB" "$PREFIX/easyconfigs/HMB-0.1.0.eb" \
    --prefix="$PREFIX" --installpath="$PREFIX" --buildpath="$PREFIX/build" \
    --sourcepath="$PREFIX/sources" --repositorypath="$PREFIX/ebfiles_repo" \
    --modules-tool=Lmod --module-syntax=Lua \
    --external-modules-metadata="$PREFIX/extmodules/metadata.cfg" \
    --allow-use-as-root-and-accept-consequences --rebuild \
    --tmpdir="$PREFIX/tmp"
echo "module use $PREFIX/modules/all $PREFIX/extmodules"
echo "module load HMB/0.1.0"
