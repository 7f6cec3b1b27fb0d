#!/usr/bin/env bash
# The main job: sets up davincirunsdk (scripts/setup.sh), then trains the
# digits classifier on 4 ranks of this machine's CPU, launched from
# examples/rank_table_4p.json through the Python API (examples/launch_digits.py),
# with the project venv's interpreter (build/venv: torch, scikit-learn and
# davincirunsdk).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/venv.sh
use_venv
exec "$VENV_PYTHON" examples/launch_digits.py "$@"
