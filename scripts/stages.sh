# Sourced by scripts/test.sh: runs its stages one after another, each whatever
# became of the ones before (a failure hides nothing that follows), and ends
# with a table of them all.
#
#   run_stage NAME COMMAND [ARGS...]   run it; passed, or FAILED (exit N)
#   skip_stage NAME REASON             record it as skipped, and why
#   stage_table                        print the table; status 1 if any failed
STAGE_NAMES=() STAGE_RESULTS=() STAGE_SECONDS=()

run_stage() {
  local name=$1 t0=$SECONDS rc
  shift
  echo "== $name"
  # A subshell with errexit, outside any condition (where bash would ignore
  # it): a stage's first failing command ends that stage only, and its cd,
  # exports and exit stay in it.
  (
    set -e
    "$@"
  )
  rc=$?
  STAGE_NAMES+=("$name")
  STAGE_SECONDS+=($((SECONDS - t0)))
  if ((rc == 0)); then STAGE_RESULTS+=(passed); else STAGE_RESULTS+=("FAILED (exit $rc)"); fi
  return 0
}

skip_stage() {
  echo "== $1: skipped: $2"
  STAGE_NAMES+=("$1")
  STAGE_RESULTS+=("skipped: $2")
  STAGE_SECONDS+=(0)
}

stage_table() {
  local i width=5 failed=0
  for i in "${!STAGE_NAMES[@]}"; do
    ((${#STAGE_NAMES[i]} > width)) && width=${#STAGE_NAMES[i]}
  done
  echo
  printf '%-*s  %7s  %s\n' "$width" stage seconds result
  for i in "${!STAGE_NAMES[@]}"; do
    printf '%-*s  %7s  %s\n' "$width" "${STAGE_NAMES[i]}" "${STAGE_SECONDS[i]}" "${STAGE_RESULTS[i]}"
    [[ ${STAGE_RESULTS[i]} == FAILED* ]] && failed=$((failed + 1))
  done
  if ((failed)); then
    echo "$failed of ${#STAGE_NAMES[@]} stages failed"
    return 1
  fi
  echo "no stage failed"
}
