"""The main job for real: 4-rank data-parallel training of the digits
classifier (PyTorch DDP, gloo on the CPU), launched from a rank table through
the Python API exactly as the README's first command does."""

import os
import re
import sys

import pytest
from conftest import REPO, needs_modules

from davincirunsdk import start_and_wait_distributed_train

# A real training run: -m "not slow" leaves it out.
pytestmark = [pytest.mark.slow, needs_modules("torch", "sklearn")]

EXAMPLES = os.path.join(REPO, "examples")


def test_four_rank_training_reaches_high_accuracy(tmp_path, job_env):
    code = start_and_wait_distributed_train(
        [sys.executable, os.path.join(EXAMPLES, "train_digits.py"), "--epochs", "8"],
        work_dir=EXAMPLES,
        log_dir=str(tmp_path / "log"),
        rank_table=os.path.join(EXAMPLES, "rank_table_4p.json"),
        env=job_env,
        output_notebook=False,
    )
    assert code == 0
    run_dir = tmp_path / "log" / "latest"
    logs = {}
    for rank in range(4):
        with open(run_dir / ("rank_%d.device_%d.log" % (rank, rank))) as f:
            logs[rank] = f.read()
        # Every rank trained its own shard for every epoch.
        assert len(re.findall(r"rank %d epoch +\d+/8: train loss" % rank, logs[rank])) == 8
    match = re.search(r"final test accuracy: ([0-9.]+) \((\d+) test samples, world size 4\)", logs[0])
    assert match, logs[0]
    assert float(match.group(1)) > 0.85  # chance is 0.10
    assert "replicas in sync: True" in logs[0]
