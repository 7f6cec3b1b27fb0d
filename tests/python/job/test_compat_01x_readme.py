"""The examples of davincirunsdk 0.1.x's README and its own tests run
unchanged, as scripts: init_rank_table() then start_and_wait_distributed_train,
start_distributed_train + wait_distributed_train, and a failure raising
davincirunsdk.notebook.exception.DistributedRuntimeError."""

import os
import subprocess
import sys
import textwrap

import pytest

EXAMPLES = {
    # README, "训练作业" (training job).
    "init_then_start_and_wait": """
        from davincirunsdk import init_rank_table, start_and_wait_distributed_train

        init_rank_table()
        start_and_wait_distributed_train(['python', 'train.py'])
    """,
    # README, "调试环境" (development environment).
    "output_notebook": """
        import os

        os.environ['DATA_PATH'] = '/cache/cifar-10-batches-bin'
        from davincirunsdk import start_and_wait_distributed_train

        cmd = ['python', 'train.py']
        start_and_wait_distributed_train(cmd, output_notebook=True)
    """,
    # 0.1.x's tests/test_sdk.py, its full and failure stacks.
    "start_wait_and_failure": """
        import pytest
        from davincirunsdk import init_rank_table, start_distributed_train, wait_distributed_train
        from davincirunsdk.common import RankTableEnv
        from davincirunsdk.notebook.exception import DistributedRuntimeError

        init_rank_table()
        manager = start_distributed_train(['python', 'train.py'])
        assert wait_distributed_train(manager) == 0
        manager = start_distributed_train(['python', 'fail.py'])
        assert wait_distributed_train(manager, raise_exception=False) != 0
        manager = start_distributed_train(['python', 'fail.py'])
        with pytest.raises(DistributedRuntimeError):
            wait_distributed_train(manager)
    """,
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_0_1_x_example_runs_unchanged(name, tmp_path, rank_table, job_env):
    (tmp_path / "train.py").write_text("import os\nprint('trained', os.environ['RANK_ID'], os.environ['RANK_SIZE'])\n")
    (tmp_path / "fail.py").write_text("raise SystemExit(3)\n")
    (tmp_path / "example.py").write_text(textwrap.dedent(EXAMPLES[name]))
    python = os.path.dirname(sys.executable)
    env = dict(os.environ, RANK_TABLE_FILE=rank_table(2), PATH=python + os.pathsep + os.environ["PATH"], **job_env)
    env.pop("RANK_TABLE_FILE_V_1_0", None)
    done = subprocess.run([sys.executable, "example.py"], cwd=str(tmp_path), env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    if name != "start_wait_and_failure":
        assert "trained 0 2" in done.stdout and "trained 1 2" in done.stdout
