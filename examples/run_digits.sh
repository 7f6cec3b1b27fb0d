#!/usr/bin/env bash
# The main job: sets up davincirunsdk (scripts/setup.sh), then trains the
# digits classifier on 4 ranks of this machine's CPU, launched from
# examples/rank_table_4p.json through the Python API (examples/launch_digits.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${PYTHON:-python3}" examples/launch_digits.py "$@"
