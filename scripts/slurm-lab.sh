#!/usr/bin/env bash
# A real Slurm on an hmb lab (docs/lab.md): munged, slurmctld and one slurmd per node, each inside
# its node's namespaces, on the nodes `hmb lab up` lays out.
#
#   scripts/slurm-lab.sh up [--name NAME] [--nodes N]   install what is missing, lab + Slurm up,
#                                                        print the SLURM_CONF to export
#   scripts/slurm-lab.sh down [--name NAME]             stop everything, remove the lab
#   scripts/slurm-lab.sh status [--name NAME]
#   scripts/slurm-lab.sh install                         only install Debian's Slurm and munge
#
# Installing needs root and apt-get (Debian's slurmctld, slurmd, slurm-client, munge 22.05 and
# libpmix-dev, which holds the libpmix.so Slurm's pmix plugin opens). No service is started by
# the installation. A failed or interrupted `up` takes the lab down again (trap).
set -euo pipefail
cd "$(dirname "$0")/.."
HMB=${HMB:-.venv/bin/hmb}
PACKAGES="slurmctld slurmd slurm-client munge libpmix-dev"

say() { echo "slurm-lab: $*" >&2; }

missing_packages() {
    local p out=()
    for p in $PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || out+=("$p")
    done
    echo "${out[*]:-}"
}

install_missing() {
    local need
    if ! command -v dpkg-query >/dev/null; then
        for t in slurmctld slurmd munged sbatch; do
            command -v "$t" >/dev/null || [ -x "/usr/sbin/$t" ] || {
                say "cannot install Slurm here: no dpkg/apt-get (install $PACKAGES or your system's equivalent)"
                exit 2
            }
        done
        return 0
    fi
    need=$(missing_packages)
    [ -z "$need" ] && return 0
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        say "cannot install $need: needs root and apt-get (install them, then run this again)"
        exit 2
    fi
    say "installing $need (apt-get; no service is started)"
    local guard=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then   # Debian's postinst scripts must not start the daemons
        guard=/usr/sbin/policy-rc.d
        printf '#!/bin/sh\nexit 101\n' > "$guard"
        chmod 755 "$guard"
    fi
    # shellcheck disable=SC2086
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $need >/tmp/slurm-lab-apt.log 2>&1; then
        DEBIAN_FRONTEND=noninteractive apt-get update -q >>/tmp/slurm-lab-apt.log 2>&1 || true
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $need >>/tmp/slurm-lab-apt.log 2>&1 || {
            [ -n "$guard" ] && rm -f "$guard"
            say "apt-get install $need failed (log: /tmp/slurm-lab-apt.log, last line: $(tail -n 1 /tmp/slurm-lab-apt.log))"
            exit 2
        }
    fi
    [ -n "$guard" ] && rm -f "$guard"
    need=$(missing_packages)
    if [ -n "$need" ]; then
        say "still missing after apt-get: $need"
        exit 2
    fi
}

[ -x "$HMB" ] || { say "$HMB not found: run make setup first (or set HMB=path/to/hmb)"; exit 2; }
cmd=${1:-}
[ $# -gt 0 ] && shift

# The options, read once, in both forms (--name X, --name=X): the trap takes down the lab they
# name (it read only `--name X`, so `up --name=X` then SIGTERM took down hmblab and left X up).
# hmb checks them all (`hmb lab up --dry-run` first).
name=hmblab
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    case "${args[$i]}" in
        --name) name=${args[$((i + 1))]:-}; i=$((i + 1)) ;;
        --name=*) name=${args[$i]#--name=} ;;
    esac
done

child=""
interrupted() {
    # the signal goes on to `hmb lab up`, which takes down what it made and says what is left;
    # then down, in case it had not started it
    trap '' INT TERM HUP
    if [ -n "$child" ] && kill -TERM "$child" 2>/dev/null; then wait "$child" 2>/dev/null || true; fi
    if "$HMB" lab down --name "$name" >/dev/null 2>&1; then
        say "interrupted: lab $name is down"
    else
        say "interrupted: lab $name could not be taken down completely: $("$HMB" lab status --name "$name" 2>&1 | tail -n 1)"
    fi
    exit 130
}

case "$cmd" in
    up)
        [ "$(id -u)" = 0 ] || { say "needs root (network namespaces, a bridge, Slurm's daemons)"; exit 2; }
        # The options first (a bad --name or --nodes was named only after apt-get had installed Slurm).
        "$HMB" lab up --dry-run "$@" >/dev/null || exit 2
        install_missing
        trap interrupted INT TERM HUP
        # in the background, so a signal reaches the trap at once (bash runs it only after a
        # foreground command ends)
        "$HMB" lab up --slurm "$@" &
        child=$!
        rc=0
        wait "$child" || rc=$?
        trap - INT TERM HUP
        exit "$rc"
        ;;
    down)
        "$HMB" lab down "$@"
        ;;
    status)
        "$HMB" lab status "$@"
        ;;
    install)
        install_missing
        ;;
    *)
        say "${cmd:+unknown command '$cmd': }usage: scripts/slurm-lab.sh up|down|status|install [--name NAME] [--nodes N]"
        exit 2
        ;;
esac
