#!/bin/sh
# `make container`: build the Containerfile with Charliecloud and run HMB inside it. No registry
# is needed: the base is Debian bookworm made from Debian's packages (debootstrap) and imported.
# Work files under $HMB_CONTAINER_DIR (default /var/tmp/hmb-container). docs/container.md.
set -eu
WORK=${HMB_CONTAINER_DIR:-/var/tmp/hmb-container}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
TAG=${HMB_CONTAINER_TAG:-hmb}
REPO=$(cd "$(dirname "$0")/.." && pwd)
export USER="${USER:-$(id -un)}"                             # Charliecloud wants one
export CH_IMAGE_STORAGE="${CH_IMAGE_STORAGE:-$WORK/storage}" # its image store, beside the rest
# ch-image is a Python program that needs the system's python3 (its lark), not a venv's or pyenv's.
CH_IMAGE="/usr/bin/python3 $(command -v ch-image || echo /usr/bin/ch-image)"

for tool in ch-image ch-run ch-convert debootstrap; do
    command -v "$tool" >/dev/null || {
        echo "make container: $tool is missing (apt-get install charliecloud debootstrap)" >&2; exit 2; }
done
mkdir -p "$WORK"

if [ ! -x "$WORK/base/bin/sh" ]; then
    echo "make container: Debian bookworm base from $MIRROR (debootstrap, about a minute)"
    rm -rf "$WORK/base"
    debootstrap --variant=minbase bookworm "$WORK/base" "$MIRROR" > "$WORK/debootstrap.log" 2>&1 || {
        echo "make container: debootstrap failed (see $WORK/debootstrap.log)" >&2; exit 1; }
fi
# debootstrap makes device nodes in /dev; ch-image import would copy /dev/zero's endless
# contents into a file (filling the disk). ch-run mounts the host's /dev, so the image needs none.
find "$WORK/base/dev" -mindepth 1 -delete
$CH_IMAGE import "$WORK/base" hmb-base

# The build context: the repository's files (not .venv, build/, results/), plus this machine's
# own certificate authorities when it has some (pip behind a proxy that re-signs).
rm -rf "$WORK/context" && mkdir -p "$WORK/context/.container-ca"
(cd "$REPO" && git ls-files -co --exclude-standard -z | xargs -0 tar cf - --no-recursion) | tar xf - -C "$WORK/context"
cp /usr/local/share/ca-certificates/*.crt "$WORK/context/.container-ca/" 2>/dev/null || true

$CH_IMAGE build --force --build-arg BASE=hmb-base -t "$TAG" -f "$REPO/Containerfile" "$WORK/context"
rm -rf "$WORK/image"
ch-convert -i ch-image "$TAG" "$WORK/image"

run() { echo "\$ ch-run $WORK/image -- $*"; ch-run --unset-env='*' --set-env -c /tmp "$WORK/image" -- "$@"; }
run hmb-bench --version
run mpiexec -n 2 -bind-to core hmb-bench p2p --sizes 8,1K,64K --mode latency,bw
# hmb check's FAILs are this machine's physics (load, steal), not the container: said, not fatal.
run hmb check --quick --json /tmp/hmb-container-check.json \
    || echo "make container: hmb check reported FAIL above (exit $?): the machine, not the image; the image is $WORK/image"
