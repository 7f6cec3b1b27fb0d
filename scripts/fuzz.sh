#!/usr/bin/env bash
# Fuzzes the rank table parser (tests/fuzz/fuzz_rank_table.cpp) with libFuzzer
# for SECONDS (default 60), under AddressSanitizer and UndefinedBehaviorSanitizer.
#
#   bash scripts/fuzz.sh [SECONDS]
#
# Builds build/fuzz with clang (incrementally), then runs over the suite's rank
# tables (tests/data/rank_tables/{valid,invalid}, only read) and the corpus
# kept in build/fuzz/corpus, where new inputs are added so that runs
# accumulate. Crashing, leaking or hanging inputs go to
# build/fuzz/findings/<run>/. Prints a summary; exits non-zero on a finding.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${1:-60}
if ! [[ $duration =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz: SECONDS must be a positive whole number of seconds, got '$duration'" >&2
  exit 2
fi
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found; install clang and libclang-rt-14-dev (scripts/setup.sh)" >&2
  exit 2
fi

build=build/fuzz
target=$build/tests/fuzz/fuzz_rank_table
corpus=$build/corpus
findings=$build/findings/$(date -u +%Y%m%dT%H%M%SZ)
log=$build/last-run.log

echo "fuzz: building $target (clang, ASan + UBSan; the fuzz preset)"
build_start=$(date +%s)
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
build_seconds=$(($(date +%s) - build_start))

mkdir -p "$corpus" "$findings"
echo "fuzz: running for ${duration} s (log: $log)"
status=0
# The first directory receives new inputs; the suite's tables are only read.
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  "$target" "$corpus" tests/data/rank_tables/valid tests/data/rank_tables/invalid \
  -max_total_time="$duration" -max_len=65536 -dict=tests/fuzz/rank_table.dict -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$findings/" >"$log" 2>&1 || status=$?

# libFuzzer's last status line reads "#N DONE cov: C ft: F corp: ..." (or
# another event name when the run stopped on a finding).
last=$(grep -E '^#[0-9]+[[:space:]]' "$log" | tail -n 1 || true)
field() { sed -nE "s/.* $1: ([^ ]+).*/\1/p" <<<"$last"; }
final_stat() { sed -nE "s/^stat::$1: *([^ ]+).*/\1/p" "$log" | tail -n 1; }
found=$(find "$findings" -type f | sort)

echo "== fuzz summary (rank table parser)"
echo "build:       ${build_seconds} s"
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
  exit 1
fi
rmdir "$findings" 2>/dev/null || true
if ((status != 0)); then
  echo "findings:    none saved, but libFuzzer exited with status $status"
  echo "--- end of the libFuzzer log:"
  tail -n 60 "$log"
  exit 1
fi
echo "findings:    0"

# Keep only the inputs that add coverage, so that the corpus (and the start of
# the next run) does not grow with every run.
merged=$build/corpus.merging
rm -rf "$merged" && mkdir -p "$merged"
if "$target" -merge=1 -max_len=65536 -timeout=10 -rss_limit_mb=2048 "$merged" "$corpus" \
  >>"$log" 2>&1; then
  rm -rf "$corpus" && mv "$merged" "$corpus"
  echo "merged:      $(find "$corpus" -type f | wc -l) files keep the coverage"
else
  rm -rf "$merged"
  echo "fuzz: merging the corpus failed (see $log); the corpus is left as it was" >&2
  exit 1
fi
