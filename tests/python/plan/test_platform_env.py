"""Platform defaults in real jobs (docs/environment.md, "Platform
defaults"): each rank's ASCEND_PROCESS_LOG_PATH inside the run directory,
the user's value winning, 0.1.x's ModelArts rules, and the cache disk
(DAVINCIRUN_CACHE_ROOT pointing at a directory of the test)."""

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import python_command

from davincirunsdk import start_distributed_train

NAMES = ["ASCEND_PROCESS_LOG_PATH", "ASCEND_WORK_PATH", "ASCEND_CACHE_PATH", "MS_COMPILER_CACHE_PATH", "GLOG_v",
         "GLOG_log_dir", "SLOG_PRINT_TO_STDOUT"]

# Each rank prints, as one JSON line, the variables of NAMES, whether the
# directories they name exist while it runs, and their modes.
RANK_CODE = (
    "import json, os, stat\n"
    "names = %r\n"
    "values = dict((n, os.environ.get(n)) for n in names)\n"
    "dirs = dict((n, os.path.isdir(v)) for n, v in values.items() if v and v.startswith('/'))\n"
    "modes = dict((n, stat.S_IMODE(os.stat(values[n]).st_mode)) for n, made in dirs.items() if made)\n"
    "print('PLATFORM=' + json.dumps({'values': values, 'dirs': dirs, 'modes': modes, 'cwd': os.getcwd()}))\n"
    % (NAMES,)
)


def run_job(rank_table, job_env, ranks=2, env=None, **keywords):
    """Runs RANK_CODE on `ranks` ranks; returns the job and each rank's report."""
    job = start_distributed_train(python_command(RANK_CODE), rank_table=rank_table(ranks),
                                  env=dict(job_env, **(env or {})), output_notebook=False, **keywords)
    assert job.wait() == 0
    reports = []
    for rank in range(ranks):
        with open(os.path.join(job.run_dir, "rank_%d.device_%d.log" % (rank, rank))) as f:
            reports.append(json.loads(f.read().split("PLATFORM=")[1]))
    return job, reports


def gone_soon(path, seconds=10.0):
    """True once `path` no longer exists (the supervisor removes per-job caches as it ends)."""
    deadline = time.monotonic() + seconds
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not os.path.exists(path)


def test_each_rank_has_its_own_process_log_directory_in_the_run_directory(tmp_path, rank_table, job_env):
    job, reports = run_job(rank_table, job_env, ranks=3, log_dir=str(tmp_path / "log"))
    paths = [r["values"]["ASCEND_PROCESS_LOG_PATH"] for r in reports]
    assert paths == [os.path.join(job.run_dir, "ascend", "process_log", "rank_%d" % n) for n in range(3)]
    for report in reports:
        # Left to CANN, which makes a missing log directory itself (docs/environment.md).
        assert not report["dirs"]["ASCEND_PROCESS_LOG_PATH"]
        # The cache disk is off (conftest): nothing is redirected, nothing else is set.
        assert report["values"]["ASCEND_WORK_PATH"] is None and report["values"]["GLOG_v"] is None


def test_a_run_folder_holds_only_what_the_ranks_made(tmp_path, rank_table, job_env):
    """Not a skeleton of empty ascend/ and mindspore/om/ folders: rank 1
    writes a process log, making its directory as CANN does, rank 0
    nothing."""
    code = ("import os\n"
            "if os.environ['RANK'] == '1':\n"
            "    os.makedirs(os.environ['ASCEND_PROCESS_LOG_PATH'])\n"
            "    open(os.path.join(os.environ['ASCEND_PROCESS_LOG_PATH'], 'plog.log'), 'w').write('x')\n")
    job = start_distributed_train(python_command(code), rank_table=rank_table(2), env=job_env,
                                  log_dir=str(tmp_path / "log"), output_notebook=False)
    assert job.wait() == 0
    run_dir = job.run_dir
    assert os.path.isfile(os.path.join(run_dir, "ascend", "process_log", "rank_1", "plog.log"))
    assert not os.path.exists(os.path.join(run_dir, "ascend", "process_log", "rank_0"))
    assert not os.path.exists(os.path.join(run_dir, "mindspore"))
    assert sorted(os.listdir(run_dir)) == ["ascend", "events.txt", "job.json", "rank_0.device_0.log",
                                           "rank_1.device_1.log", "rank_table.json", "report.html", "summary.json"]


def test_a_value_the_user_set_wins(tmp_path, rank_table, job_env, monkeypatch):
    mine = str(tmp_path / "my-plogs")
    monkeypatch.setenv("ASCEND_PROCESS_LOG_PATH", mine)  # inherited
    monkeypatch.setenv("DAVINCIRUN_CACHE_ROOT", str(tmp_path))
    job, reports = run_job(rank_table, job_env, log_dir=str(tmp_path / "log"),
                           env={"MA_RUN_MODE_ENV": "normal", "GLOG_v": "0", "ASCEND_WORK_PATH": mine})
    for report in reports:
        values = report["values"]
        assert values["ASCEND_PROCESS_LOG_PATH"] == mine and values["ASCEND_WORK_PATH"] == mine
        assert values["GLOG_v"] == "0"  # given with env=
        assert values["GLOG_log_dir"] == os.path.join(job.run_dir, "mindspore", "log")  # not set: the default
        assert report["dirs"]["GLOG_log_dir"]
    assert not os.path.exists(mine)  # a user's directory is the user's to make
    assert not os.path.exists(os.path.join(job.run_dir, "ascend"))
    assert not os.path.exists(tmp_path / "davincirun" / "work")


def test_modelarts_ide_mode_and_a_malformed_operator(tmp_path, rank_table, job_env):
    operator = json.dumps({"obs": {"obs_url": "obs://bucket/code/"}, "ide_mode": True})
    _, reports = run_job(rank_table, job_env, ranks=1, log_dir=str(tmp_path / "log"),
                         env={"MA_ALGORITHM_OPERATOR": operator})
    assert reports[0]["values"]["SLOG_PRINT_TO_STDOUT"] == "1"
    with pytest.warns(UserWarning, match="MA_ALGORITHM_OPERATOR is not a JSON object"):
        _, reports = run_job(rank_table, job_env, ranks=1, log_dir=str(tmp_path / "log"),
                             env={"MA_ALGORITHM_OPERATOR": "{'ide_mode': True}"})
    assert reports[0]["values"]["SLOG_PRINT_TO_STDOUT"] is None  # the job ran, without the IDE rule


def test_the_cache_disk_takes_the_logs_and_the_working_files(tmp_path, rank_table, job_env, monkeypatch):
    code_dir, root = tmp_path / "code", tmp_path / "cache"
    code_dir.mkdir()
    root.mkdir()
    monkeypatch.chdir(str(code_dir))
    monkeypatch.setenv("DAVINCIRUN_CACHE_ROOT", str(root))
    job, reports = run_job(rank_table, job_env, random_cache_dir=True)
    base = str(root / "davincirun")
    run_name = os.path.basename(job.run_dir)
    assert job.run_dir == os.path.join(base, "log", run_name)
    assert os.path.realpath(os.path.join(base, "log", "latest")) == job.run_dir
    work = os.path.join(base, "work", run_name)
    kernel_cache = os.path.join(base, "kernel_cache", run_name)
    for report in reports:
        values = report["values"]
        assert values["ASCEND_WORK_PATH"] == work and values["ASCEND_CACHE_PATH"] == kernel_cache
        assert report["dirs"]["ASCEND_WORK_PATH"] and report["dirs"]["ASCEND_CACHE_PATH"]
        assert os.path.dirname(values["MS_COMPILER_CACHE_PATH"]) == str(root)
        assert values["ASCEND_PROCESS_LOG_PATH"].startswith(job.run_dir + "/")
        assert report["cwd"] == str(code_dir)  # the ranks' working directory is unchanged
    assert os.path.isdir(work)  # kept: CANN's build and check files of this run
    assert gone_soon(kernel_cache)  # a per-job cache
    assert gone_soon(reports[0]["values"]["MS_COMPILER_CACHE_PATH"])
    assert os.listdir(str(code_dir)) == []  # the code folder stays clean


def test_an_explicit_log_dir_wins_over_the_cache_disk(tmp_path, rank_table, job_env, monkeypatch):
    root = tmp_path / "cache"
    root.mkdir()
    monkeypatch.setenv("DAVINCIRUN_CACHE_ROOT", str(root))
    job, reports = run_job(rank_table, job_env, ranks=1, log_dir=str(tmp_path / "mine"))
    assert os.path.dirname(job.run_dir) == str(tmp_path / "mine")
    assert not os.path.exists(root / "davincirun" / "log")
    # The working files still leave the code folder.
    assert reports[0]["values"]["ASCEND_WORK_PATH"] == str(root / "davincirun" / "work" / os.path.basename(job.run_dir))


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_an_unusable_cache_root_is_not_used(tmp_path, rank_table, job_env, monkeypatch, kind):
    code_dir, root = tmp_path / "code", tmp_path / "cache"
    code_dir.mkdir()
    if kind == "file":
        root.write_text("not a directory")
    monkeypatch.chdir(str(code_dir))
    monkeypatch.setenv("DAVINCIRUN_CACHE_ROOT", str(root))
    why = "not a directory" if kind == "file" else "No such file or directory"
    with pytest.warns(UserWarning, match=r"DAVINCIRUN_CACHE_ROOT .* cannot be used \(%s\)" % why):
        job, reports = run_job(rank_table, job_env, ranks=1, random_cache_dir=True)
    assert os.path.dirname(job.run_dir) == str(code_dir / "log")  # the former default
    values = reports[0]["values"]
    assert values["ASCEND_WORK_PATH"] is None and values["ASCEND_CACHE_PATH"] is None
    assert not values["MS_COMPILER_CACHE_PATH"].startswith(str(root))
    if kind == "file":
        assert root.read_text() == "not a directory"
    else:
        assert not root.exists()


def test_the_cli_says_where_the_logs_went(tmp_path, rank_table, job_env):
    root = tmp_path / "cache"
    root.mkdir()
    davincirun = os.path.join(os.path.dirname(sys.executable), "davincirun")
    program = davincirun if os.access(davincirun, os.X_OK) else "davincirun"
    env = dict(os.environ, DAVINCIRUN_CACHE_ROOT=str(root), **job_env)
    proc = subprocess.run([program, "-r", rank_table(1), "true"], cwd=str(tmp_path), env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "logs in %s/davincirun/log/" % root in proc.stderr
    assert not (tmp_path / "log").exists()


# A graph-mode shape error: MindSpore 2.10.0 writes rank_<id>/om/analyze_fail.ir
# under MS_OM_PATH, else into the working directory, and its message points there.
GRAPH_SHAPE_ERROR = (
    "import numpy as np\n"
    "import mindspore as ms\n"
    "from mindspore import nn, Tensor\n"
    "ms.set_context(mode=ms.GRAPH_MODE)\n"
    "print(nn.Dense(16, 4)(Tensor(np.ones((8, 10), np.float32))))\n"
)


@pytest.mark.mindspore
def test_mindspores_files_of_a_failed_compile_stay_out_of_the_code_folder(tmp_path, rank_table, job_env,
                                                                          mindspore_python):
    from davincirunsdk import DistributedRuntimeError

    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(GRAPH_SHAPE_ERROR)
    job = start_distributed_train([mindspore_python, "train.py"], work_dir=str(code), log_dir=str(tmp_path / "log"),
                                  rank_table=rank_table(1), env=job_env, output_notebook=False)
    with pytest.raises(DistributedRuntimeError) as info:
        job.wait()
    assert "For 'MatMul'" in str(info.value)
    assert sorted(os.listdir(str(code))) == ["train.py"]
    assert os.path.isfile(os.path.join(job.run_dir, "mindspore", "om", "rank_0", "om", "analyze_fail.ir"))
