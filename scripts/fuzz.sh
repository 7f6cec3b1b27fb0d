#!/usr/bin/env bash
# Fuzzes, with libFuzzer under AddressSanitizer and UndefinedBehaviorSanitizer,
# the two parsers that read untrusted bytes: the rank table parser
# (tests/fuzz/fuzz_rank_table.cpp) and the peer channel's frames and messages
# (tests/fuzz/fuzz_peer_message.cpp), each for SECONDS (default 60).
#
#   bash scripts/fuzz.sh [SECONDS] [rank_table|peer_message]...
#
# Builds build/fuzz with clang (incrementally), then runs each target over its
# corpus kept in build/fuzz/corpus/<target>, where new inputs are added so
# that runs accumulate (the rank tables also start from the suite's tables,
# tests/data/rank_tables/{valid,invalid}, only read). Crashing, leaking or
# hanging inputs go to build/fuzz/findings/<run>/. Prints a summary per
# target; exits non-zero on a finding.
set -euo pipefail
cd "$(dirname "$0")/.."
# cmake and ninja from the project venv (scripts/setup.sh).
source scripts/venv.sh
use_venv

duration=${1:-60}
if ! [[ $duration =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz: SECONDS must be a positive whole number of seconds, got '$duration'" >&2
  exit 2
fi
shift || true
targets=("$@")
((${#targets[@]})) || targets=(rank_table peer_message)
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found; install clang and libclang-rt-14-dev (scripts/setup.sh)" >&2
  exit 2
fi

build=build/fuzz
echo "fuzz: building the targets (clang, ASan + UBSan; the fuzz preset)"
build_start=$(date +%s)
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
build_seconds=$(($(date +%s) - build_start))
echo "build:       ${build_seconds} s"

fuzz_one() {
  local name=$1 target=$build/tests/fuzz/fuzz_$1
  local corpus=$build/corpus/$1 findings log=$build/last-run-$1.log
  findings=$build/findings/$(date -u +%Y%m%dT%H%M%SZ)-$1
  local seeds=() dict=()
  case $name in
    rank_table)
      # The corpus of earlier runs lived in build/fuzz/corpus itself.
      seeds=(tests/data/rank_tables/valid tests/data/rank_tables/invalid
        tests/data/rank_tables_2_0/valid tests/data/rank_tables_2_0/invalid)
      dict=(-dict=tests/fuzz/rank_table.dict) ;;
    peer_message) dict=(-dict=tests/fuzz/peer_message.dict) ;;
    *) echo "fuzz: unknown target '$name' (rank_table, peer_message)" >&2; return 2 ;;
  esac
  mkdir -p "$corpus" "$findings"
  echo "fuzz: running $name for ${duration} s (log: $log)"
  local status=0
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$target" "$corpus" "${seeds[@]}" \
    -max_total_time="$duration" -max_len=65536 "${dict[@]}" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$findings/" >"$log" 2>&1 || status=$?

  local last found
  last=$(grep -E '^#[0-9]+[[:space:]]' "$log" | tail -n 1 || true)
  field() { sed -nE "s/.* $1: ([^ ]+).*/\1/p" <<<"$last"; }
  final_stat() { sed -nE "s/^stat::$1: *([^ ]+).*/\1/p" "$log" | tail -n 1; }
  found=$(find "$findings" -type f | sort)

  echo "== fuzz summary ($name)"
  echo "time:        ${duration} s"
  echo "executions:  $(final_stat number_of_executed_units)"
  echo "exec/s:      $(final_stat average_exec_per_sec)"
  echo "coverage:    cov: $(field cov) ft: $(field ft)"
  echo "corpus:      $(find "$corpus" -type f | wc -l) files in $corpus ($(du -sh "$corpus" | cut -f1))"
  echo "peak rss:    $(final_stat peak_rss_mb) MB"
  if [[ -n $found ]]; then
    echo "findings:    $(wc -l <<<"$found")"
    echo "$found" | sed 's/^/  /'
    echo "--- end of the libFuzzer log:"
    tail -n 60 "$log"
    return 1
  fi
  rmdir "$findings" 2>/dev/null || true
  if ((status != 0)); then
    echo "findings:    none saved, but libFuzzer exited with status $status"
    echo "--- end of the libFuzzer log:"
    tail -n 60 "$log"
    return 1
  fi
  echo "findings:    none"

  # Keep only the inputs that add coverage, so that the corpus (and the start
  # of the next run) does not grow with every run.
  local merged=$build/corpus.merging
  rm -rf "$merged" && mkdir -p "$merged"
  if "$target" -merge=1 -max_len=65536 -timeout=10 -rss_limit_mb=2048 "$merged" "$corpus" >>"$log" 2>&1; then
    rm -rf "$corpus" && mv "$merged" "$corpus"
    echo "merged:      $(find "$corpus" -type f | wc -l) files keep the coverage"
  else
    rm -rf "$merged"
    echo "fuzz: merging the corpus of $name failed (see $log); the corpus is left as it was" >&2
    return 1
  fi
}

result=0
for name in "${targets[@]}"; do
  fuzz_one "$name" || result=1
done
exit $result
