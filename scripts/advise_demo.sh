#!/usr/bin/env bash
# hmb advise on stencil3d (a size where a higher eager threshold should help, one where it should
# not) and on an outside MPI program (HPCCG), for one MPI: probe, profile, advise, verify.
#
#   scripts/advise_demo.sh mpich   [OUTDIR]    (default OUTDIR: /tmp/hmb-advise-demo-MPI)
#   scripts/advise_demo.sh openmpi [OUTDIR]
#
# Needs `hmb build --mpi MPI` done (hmb-bench, libhmbprof.so). Environment knobs: LAUNCHES (verify
# launch pairs, default 5), ITERS (stencil3d iterations, default 200), HELP_SIZE (a rendezvous size
# just above the switch: 16K on MPICH, 8K on Open MPI), NOHELP_SIZES (below the switch and far above
# it: "4K 1M" on MPICH, "2K 1M" on Open MPI), SIZES (default "$HELP_SIZE $NOHELP_SIZES"; none: no stencil3d), HELP_THRESHOLD (what to verify
# where the advice is "keep" or cannot be set; default: the HELP_SIZE case's advice), SWITCH (the
# current switch instead of the probe's: 4016 B by default on Open MPI), OUTSIDE
# (default hpccg: the HPCCG mini-app, built under OUTDIR from the mirror that `fetch` brings;
# "none" skips it), HPCCG_DIMS (default "40 40 40"). docs/toolkit.md "Profiler and advisor" gives the figures.
set -euo pipefail
MPI=${1:?usage: scripts/advise_demo.sh mpich|openmpi [OUTDIR]}
OUT=${2:-/tmp/hmb-advise-demo-$MPI}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HMB="$ROOT/.venv/bin/hmb"
PY="$ROOT/.venv/bin/python"
BENCH="$ROOT/build/$MPI/hmb-bench"
PROF="$ROOT/build/$MPI/libhmbprof.so"
LAUNCHES=${LAUNCHES:-5}
ITERS=${ITERS:-200}
case $MPI in
  mpich) BIN="$ROOT/.venv/bin"; LAUNCH=("$BIN/mpiexec" -n 2 -bind-to core); PRELOAD=(-genv LD_PRELOAD "$PROF")
         HELP_SIZE=${HELP_SIZE:-16K}; NOHELP_SIZES=${NOHELP_SIZES:-4K 1M} ;;
  # Open MPI: the probe finds no clean switch on a loaded machine; SWITCH = SPEC §4's 4016 B
  openmpi) BIN="$ROOT/.mpi/openmpi/bin"; LAUNCH=("$BIN/mpiexec" -n 2 --allow-run-as-root --bind-to core)
           PRELOAD=(-x LD_PRELOAD="$PROF"); HELP_SIZE=${HELP_SIZE:-8K}; SWITCH=${SWITCH:-4016}
           NOHELP_SIZES=${NOHELP_SIZES:-2K 1M} ;;
  *) echo "advise_demo.sh: unknown MPI '$MPI' (mpich or openmpi)" >&2; exit 2 ;;
esac
SIZES=${SIZES:-$HELP_SIZE $NOHELP_SIZES}
[[ $SIZES == none ]] && SIZES=""
[[ -x $BENCH && -f $PROF ]] || { echo "advise_demo.sh: run '$HMB build --mpi $MPI' first" >&2; exit 2; }
mkdir -p "$OUT"
export PATH="$BIN:$PATH" HMB_PROF_QUIET=1

echo "== $MPI: probe (sender view, 1K:64K)"
rm -f "$OUT/probe.jsonl"
"${LAUNCH[@]}" "$BENCH" proto --test probe --view sender --range 1K:64K --json "$OUT/probe.jsonl" >/dev/null

# stencil3d's figure: the summary row "t_overall_us  <median>" (one size per launch)
FIGURE='\nt_overall_us +([0-9.]+(?:e[+-]?[0-9]+)?)'
# the advised threshold of an advice file, if the library can take it ("" if not)
advised() {
  "$PY" -c "import json,sys; j=json.load(open(sys.argv[1]))['job']; print(j['threshold_bytes'] if 'env' in j else '')" "$1"
}

for SIZE in $SIZES; do
  echo "== $MPI: stencil3d --sizes $SIZE"
  # the compute is fixed for all launches (calc-factor would re-calibrate on each setting):
  # 2 x T_comm at the default setting, from a calibration launch
  rm -f "$OUT/calib-$SIZE.jsonl"
  "${LAUNCH[@]}" "$BENCH" stencil3d --sizes "$SIZE" --iters 20 --ci-target 0 --json "$OUT/calib-$SIZE.jsonl" >/dev/null
  COMPUTE=$("$PY" -c "import json,sys
r=[json.loads(l) for l in open(sys.argv[1])]
print('%.0fus' % max(r for x in r if x.get('type') == 'result' for r in [x['extra']['compute_us']]))" "$OUT/calib-$SIZE.jsonl")
  ARGS=(stencil3d --sizes "$SIZE" --compute "$COMPUTE" --iters "$ITERS" --ci-target 0)
  echo "compute per iteration: $COMPUTE"
  HMB_PROF_OUT="$OUT/prof-$SIZE.json" "${LAUNCH[@]}" "${PRELOAD[@]}" "$BENCH" "${ARGS[@]}" >/dev/null
  for TRIGGER in post-to-wait outside-mpi; do
    "$HMB" advise "$OUT/prof-$SIZE.json" --mpi "$MPI" --probe "$OUT/probe.jsonl" ${SWITCH:+--threshold "$SWITCH"} --trigger "$TRIGGER" \
      --json "$OUT/advice-$SIZE-$TRIGGER.json" | tee "$OUT/advice-$SIZE-$TRIGGER.txt"
  done
  THRESHOLD=$(advised "$OUT/advice-$SIZE-post-to-wait.json")
  [[ $SIZE == "$HELP_SIZE" && -n $THRESHOLD ]] && HELP_THRESHOLD=${HELP_THRESHOLD:-$THRESHOLD}
  if [[ -z $THRESHOLD ]]; then
    echo "advice: none to apply; verifying the $HELP_SIZE case's advice (${HELP_THRESHOLD:?}) here instead"
    THRESHOLD=$HELP_THRESHOLD
  fi
  "$HMB" advise --verify --mpi "$MPI" --apply "$THRESHOLD" --launches "$LAUNCHES" --figure "$FIGURE" \
    -- "${LAUNCH[@]}" "$BENCH" "${ARGS[@]}" | tee "$OUT/verify-$SIZE.txt"
done

[[ ${OUTSIDE:-hpccg} == none ]] && exit 0
# An MPI program HMB did not write: the HPCCG mini-app (conjugate gradient; halo exchange =
# MPI_Irecv, pack, blocking MPI_Send, MPI_Wait), built under OUTDIR from the Mantevo/HPCCG mirror
# (the `fetch` tool brings it to /work/.mirror); never copied into the repository. Local block
# ${HPCCG_DIMS:-40 40 40}: a face of 40 x 40 doubles = 12800 B, above both libraries' switches.
HPCCG_GIT=/work/.mirror/Mantevo+HPCCG/repo
echo "== $MPI: HPCCG, built under $OUT/hpccg"
if [[ ! -x $OUT/hpccg/test_HPCCG ]]; then
  rm -rf "$OUT/hpccg" && mkdir -p "$OUT/hpccg"
  git --git-dir="$HPCCG_GIT" archive HEAD | tar -x -C "$OUT/hpccg"
  make -s -C "$OUT/hpccg" CXX="$BIN/mpicxx" LINKER="$BIN/mpicxx" USE_MPI=-DUSING_MPI CPP_OPT_FLAGS=-O2 >/dev/null
fi
read -r -a DIMS <<< "${HPCCG_DIMS:-40 40 40}"
(cd "$OUT/hpccg" && HMB_PROF_OUT="$OUT/prof-hpccg.json" "${LAUNCH[@]}" "${PRELOAD[@]}" ./test_HPCCG "${DIMS[@]}" >/dev/null)
for TRIGGER in post-to-wait outside-mpi; do
  "$HMB" advise "$OUT/prof-hpccg.json" --mpi "$MPI" --probe "$OUT/probe.jsonl" ${SWITCH:+--threshold "$SWITCH"} --trigger "$TRIGGER" \
    --json "$OUT/advice-hpccg-$TRIGGER.json" | tee "$OUT/advice-hpccg-$TRIGGER.txt"
done
THRESHOLD=$(advised "$OUT/advice-hpccg-post-to-wait.json")
if [[ -z $THRESHOLD ]]; then
  echo "advice: none to apply; verifying the $HELP_SIZE stencil3d case's advice (${HELP_THRESHOLD:?}) instead"
  THRESHOLD=$HELP_THRESHOLD
fi
# the figure: HPCCG's "Time Summary: / Total : <seconds>" (the CG solve; lower is better)
(cd "$OUT/hpccg" && "$HMB" advise --verify --mpi "$MPI" --apply "$THRESHOLD" --launches "$LAUNCHES" \
  --figure 'Time Summary: *\n +Total +: ([0-9.]+(?:e[+-]?[0-9]+)?)' -- "${LAUNCH[@]}" ./test_HPCCG "${DIMS[@]}") | tee "$OUT/verify-hpccg.txt"
