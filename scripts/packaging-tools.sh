#!/usr/bin/env bash
# The tools HMB's packaging tests need (make test-packaging, make test-lab's ReFrame tests), from
# project files: the `frameworks` extra of pyproject.toml (reframe-hpc, EasyBuild) into .venv, and
# Debian's Lmod (apt-get install lmod) for the EasyBuild module. What cannot be installed is said
# in one line; the tests that need it then skip, saying why. Exit 0 either way.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
LMOD=/usr/share/lmod/lmod/libexec/lmod

say() { echo "packaging-tools: $*" >&2; }

[ -x "$PY" ] || { say "no $PY: run make setup first"; exit 0; }

if ! "$PY" - <<'PY' 2>/dev/null
import importlib.metadata as m
want = {"reframe-hpc": "4.10.4", "easybuild-framework": "5.4.1", "easybuild-easyblocks": "5.4.1"}
raise SystemExit(any(m.version(n) != v for n, v in want.items()))
PY
then
    say "installing the frameworks extra (reframe-hpc, EasyBuild) into .venv"
    "$PY" -m pip install -q -e '.[frameworks]' || say "pip install -e '.[frameworks]' failed: the ReFrame and EasyBuild tests will skip"
fi

if [ ! -x "$LMOD" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        say "installing Lmod (apt-get install lmod)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -q --no-install-recommends lmod >/tmp/packaging-tools-apt.log 2>&1 \
            || { apt-get update -q >>/tmp/packaging-tools-apt.log 2>&1
                 apt-get install -y -q --no-install-recommends lmod >>/tmp/packaging-tools-apt.log 2>&1; } \
            || say "apt-get install lmod failed (log: /tmp/packaging-tools-apt.log): the module test will skip"
    else
        say "Lmod missing and cannot be installed here (needs root and apt-get): the module test will skip"
    fi
fi
exit 0
