"""TensorFlow for real (its CPU builds, scripts/tensorflow_env.sh): TF 2.21
on CPython 3.11 and TF 1.15.5 on CPython 3.7, each with
examples/tensorflow/: two ranks in launch mode tf-config train with
MultiWorkerMirroredStrategy to identical weights; a rank killed mid-training
ends every rank within a second (TF 1.15's peers would wait forever, TF 2's
for seconds); TensorFlow's own error is the root cause of the report; and
across two network-namespace hosts, each a davincirun of its own."""

import json
import os
import signal
import subprocess
import time

import pytest
from conftest import MARKER_VARIABLE, REPO, framework_python, process_environ, processes_with_marker
from log_watch import wait_for_text

pytestmark = pytest.mark.tensorflow

EXAMPLES = os.path.join(REPO, "examples", "tensorflow")
# Version -> (venv under build/, example): scripts/tensorflow_env.sh makes the venvs.
VERSIONS = {"2.21": ("tf2-env", "train_tf2.py"), "1.15": ("tf1-env", "train_tf1.py")}
STOP_BOUND = 1.0  # seconds from a kill to every other rank gone
ENDLESS = ["--epochs", "100000", "--step-delay", "0.01"]


@pytest.fixture(scope="module", params=sorted(VERSIONS), ids=lambda v: "tf" + v)
def tensorflow(request):
    """(python, example) of one TensorFlow version. A missing venv skips the
    test, unless DAVINCIRUN_REQUIRE_TENSORFLOW=1 (scripts/test.sh sets it):
    the full test command never skips TensorFlow quietly."""
    env_dir, example = VERSIONS[request.param]
    python = os.path.join(REPO, "build", env_dir, "bin", "python")
    message = "no TensorFlow %s environment at %s: run bash scripts/tensorflow_env.sh" % (request.param, python)
    return framework_python(python, message, "DAVINCIRUN_REQUIRE_TENSORFLOW"), os.path.join(EXAMPLES, example)


def davincirun(args, job_env, tmp_path, **kwargs):
    """davincirun in tf-config mode with two ranks here, the test's marker on every rank."""
    argv = ["davincirun", "--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE]), "--launch-mode",
            "tf-config", "--nproc", "2", "-l", str(tmp_path / "log")] + list(args)
    return subprocess.Popen(argv, cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True, **kwargs)


def rank_pid(marker, rank):
    for pid in processes_with_marker(marker):
        if (process_environ(pid) or {}).get(b"RANK") == str(rank).encode():
            return pid
    raise AssertionError("no process of rank %d" % rank)


@pytest.mark.slow
def test_two_ranks_train_to_identical_weights(tmp_path, job_env, tensorflow):
    python, example = tensorflow
    started = time.monotonic()
    proc = davincirun([python, example, "--out", str(tmp_path / "out")], job_env, tmp_path)
    out, err = proc.communicate(timeout=300)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, err[-3000:]
    results = [json.loads((tmp_path / "out" / ("rank%d.json" % rank)).read_text()) for rank in range(2)]
    assert results[0]["sha256"] == results[1]["sha256"]  # the replicas stayed identical
    assert results[0]["test_accuracy"] == results[1]["test_accuracy"] > 0.9  # 4 classes: chance is 0.25
    assert results[0]["workers"] == 2
    import numpy as np

    weights = [np.load(str(tmp_path / "out" / ("rank%d.npz" % rank))) for rank in range(2)]
    assert weights[0].files == weights[1].files and len(weights[0].files) == 4
    for name in weights[0].files:
        assert np.array_equal(weights[0][name], weights[1][name]), name
    # Each rank's lines live, under its prefix.
    assert "[rank 1] rank 1 epoch  5/5: loss" in out
    print("TensorFlow %s, 2 ranks, tf-config: %.1f s, accuracy %.4f"
          % (results[0]["tensorflow"], elapsed, results[0]["test_accuracy"]))


def test_a_killed_rank_ends_every_rank_within_a_second(tmp_path, job_env, tensorflow):
    python, example = tensorflow
    marker = job_env[MARKER_VARIABLE]
    proc = davincirun([python, example] + ENDLESS, job_env, tmp_path)
    try:
        wait_for_text(str(tmp_path / "log" / "latest" / "rank_0.device_0.log"), "rank 0 epoch  1/")
        os.kill(rank_pid(marker, 1), signal.SIGKILL)
        killed = time.monotonic()
        while processes_with_marker(marker):
            assert time.monotonic() - killed < 10, "still alive after 10 s: %s" % [
                open("/proc/%d/cmdline" % p).read().replace("\0", " ") for p in processes_with_marker(marker)]
            time.sleep(0.005)
        gone_after = time.monotonic() - killed
        err = proc.communicate(timeout=30)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert gone_after < STOP_BOUND
    assert proc.returncode != 0
    assert "rank 1 (pid" in err and "SIGKILL" in err
    print("TensorFlow rank 1 killed: every rank gone %.3f s later" % gone_after)


def test_tensorflows_error_is_the_root_cause(tmp_path, job_env, tensorflow):
    python, example = tensorflow
    proc = davincirun([python, example, "--epochs", "3", "--fail-at-epoch", "2", "--fail-rank", "1"], job_env,
                      tmp_path)
    err = proc.communicate(timeout=300)[1]
    assert proc.returncode == 1, err[-3000:]
    assert "rank 1 (pid" in err and "failed with exit code 1" in err
    assert "root cause, from its log" in err
    report = err[err.index("root cause, from its log"):]
    assert "tensorflow.python.framework.errors_impl.InvalidArgumentError: " in report
    assert "Input to reshape is a tensor with 3 values, but the requested shape has 2" in report


@pytest.mark.multihost
@pytest.mark.slow
def test_training_across_two_hosts(netns_hosts, tmp_path):
    """TensorFlow 1.15 (the quicker to start) on two hosts of one rank each:
    TF_CONFIG lists each host's address, and both replicas end alike."""
    python = os.path.join(REPO, "build", VERSIONS["1.15"][0], "bin", "python")
    python = framework_python(python, "no TensorFlow 1.15 environment at %s: run bash scripts/tensorflow_env.sh"
                              % python, "DAVINCIRUN_REQUIRE_TENSORFLOW")
    hosts = netns_hosts.hosts[:2]
    table = netns_hosts.rank_table(tmp_path / "table.json", hosts, devices=1)
    out_dir = tmp_path / "out"
    procs = [host.start_davincirun(["-r", table, "--launch-mode", "tf-config", "--", python,
                                    os.path.join(EXAMPLES, VERSIONS["1.15"][1]), "--out", str(out_dir)],
                                   cwd=host.root) for host in hosts]
    for proc in procs:
        err = proc.communicate(timeout=300)[1]
        assert proc.returncode == 0, err.decode(errors="replace")[-3000:]
    results = [json.loads((out_dir / ("rank%d.json" % rank)).read_text()) for rank in range(2)]
    assert results[0]["sha256"] == results[1]["sha256"] and results[0]["workers"] == 2
    for rank, host in enumerate(hosts):
        log = host.run_log(rank, 0)
        config = json.loads(log.split("TF_CONFIG ", 1)[1].split(", pid ", 1)[0])
        assert [w.split(":")[0] for w in config["cluster"]["worker"]] == [h.address for h in hosts]
        assert config["task"] == {"type": "worker", "index": rank}
    assert not netns_hosts.leftovers()
