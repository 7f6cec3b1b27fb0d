"""davincirunsdk.log_metric() in a rank's process (docs/metrics.md): what
it refuses and with which words, what a line holds, whole lines from
threads and forked children at once, nothing done without davincirun, and
never an exception for a file it cannot write. Real files, real
processes; the jobs that give ranks their files are in test_metrics_view.py."""

import decimal
import fractions
import json
import math
import os
import shutil
import subprocess
import sys
import time
import warnings

import pytest
from conftest import REPO, needs_modules, python_command

import davincirunsdk
from davincirunsdk import metrics
from davincirunsdk.metrics import log_metric

KEYS = ["time", "name", "value", "step", "attempt", "rank"]


@pytest.fixture
def metrics_file(tmp_path, monkeypatch):
    """This process as rank 3 of a job's second attempt: the run directory
    exists, its metrics folder not yet; a fresh sink (nothing open, nothing
    warned yet)."""
    path = tmp_path / "run" / "metrics" / "rank_3.jsonl"
    (tmp_path / "run").mkdir()
    monkeypatch.setenv("DAVINCIRUN_METRICS_FILE", str(path))
    monkeypatch.setenv("RANK_ID", "3")
    monkeypatch.setenv("DAVINCIRUN_RESTART_COUNT", "1")
    monkeypatch.setattr(metrics, "_sink", metrics._Sink())
    return path


def records(path):
    with open(str(path), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_exported_from_the_package_and_from_its_module():
    assert "log_metric" in davincirunsdk.__all__
    assert davincirunsdk.log_metric is log_metric


def test_a_line_holds_time_name_value_step_attempt_and_rank(metrics_file):
    before = time.time()
    assert log_metric("loss", 0.25, step=100) is True
    assert log_metric("损失/训练", 7) is True  # any Unicode name, written as it is (UTF-8)
    after = time.time()
    first, second = records(metrics_file)
    assert list(first) == KEYS
    assert before <= first["time"] <= after
    assert first == dict(first, name="loss", value=0.25, step=100, attempt=2, rank=3)
    assert second == dict(second, name="损失/训练", value=7.0, step=None, attempt=2, rank=3)
    assert "损失/训练" in metrics_file.read_text(encoding="utf-8")
    # The folder is made by the first call, private, as the file.
    assert oct(os.stat(str(metrics_file.parent)).st_mode & 0o777) == oct(0o700 & ~_umask())
    assert oct(os.stat(str(metrics_file)).st_mode & 0o777) == oct(0o600 & ~_umask())


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_nan_and_infinities_are_null_values_saying_which(metrics_file):
    for value in (float("nan"), math.inf, -math.inf):
        assert log_metric("loss", value, step=1)
    assert [(r["value"], r["nonfinite"]) for r in records(metrics_file)] == [
        (None, "nan"), (None, "inf"), (None, "-inf")]
    # Strict JSON: no NaN or Infinity token anywhere.
    assert "NaN" not in metrics_file.read_text() and "Infinity" not in metrics_file.read_text()


def test_without_davincirun_nothing_is_done_and_nothing_said(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DAVINCIRUN_METRICS_FILE"}
    code = "from davincirunsdk import log_metric\nprint(log_metric('loss', 1.5, step=1))\n"
    proc = subprocess.run([sys.executable, "-W", "error", "-c", code], cwd=str(tmp_path), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "False\n", "")
    assert os.listdir(str(tmp_path)) == []
    # Bad arguments are refused all the same, so a script fails alike with and without davincirun.
    proc = subprocess.run([sys.executable, "-c", "from davincirunsdk import log_metric\nlog_metric('', 1)"],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert proc.returncode == 1 and "ValueError: log_metric: name must not be empty" in proc.stderr


@pytest.mark.parametrize("name, error, words", [
    (123, TypeError, "log_metric: name must be a str, not int (123)"),
    (b"loss", TypeError, "log_metric: name must be a str, not bytes (b'loss')"),
    ("", ValueError, "log_metric: name must not be empty"),
    ("x" * 201, ValueError, "log_metric: name %r... is 201 characters long; at most 200" % ("x" * 40)),
    ("a\nb", ValueError, "log_metric: name 'a\\nb' holds the control character '\\n'"),
    ("tab\there", ValueError, "log_metric: name 'tab\\there' holds the control character '\\t'"),
    ("c1\x85", ValueError, "log_metric: name 'c1\\x85' holds the control character '\\x85'"),
    ("del\x7f", ValueError, "holds the control character '\\x7f'"),
    ("half\ud800", ValueError, "log_metric: name 'half\\ud800' is not valid Unicode (a lone surrogate)"),
])
def test_bad_names_are_refused_saying_what_and_which(metrics_file, name, error, words):
    with pytest.raises(error) as raised:
        log_metric(name, 1.0)
    assert words in str(raised.value)
    assert not metrics_file.exists()


def test_a_name_of_200_characters_is_taken(metrics_file):
    assert log_metric("n" * 200, 1)
    assert records(metrics_file)[0]["name"] == "n" * 200


@pytest.mark.parametrize("value, words", [
    ("1.5", "log_metric('loss'): value must be a real number (int, float, or an object with __float__ such as "
            "a numpy scalar or a 0-d tensor), not str"),
    (None, "not NoneType"),
    ([1.0], "not list"),
    (b"1", "not bytes"),
])
def test_values_that_are_not_numbers_are_refused(metrics_file, value, words):
    with pytest.raises(TypeError) as raised:
        log_metric("loss", value)
    assert words in str(raised.value)
    assert not metrics_file.exists()


def test_a_number_too_large_for_a_float_is_refused(metrics_file):
    with pytest.raises(ValueError, match=r"^log_metric\('big'\): value int cannot be made a float: "):
        log_metric("big", 10 ** 400)


def test_bools_decimals_and_fractions_are_numbers(metrics_file):
    for value in (True, False, decimal.Decimal("1.25"), fractions.Fraction(1, 4), 3):
        assert log_metric("v", value)
    assert [r["value"] for r in records(metrics_file)] == [1.0, 0.0, 1.25, 0.25, 3.0]


@needs_modules("numpy")
def test_numpy_scalars_and_integers(metrics_file):
    import numpy

    for value, step in [(numpy.float32(0.5), numpy.int64(7)), (numpy.int16(-3), numpy.uint8(8)),
                        (numpy.bool_(True), None), (numpy.array(2.5), 9), (numpy.float64("nan"), 10)]:
        assert log_metric("np", value, step=step)
    got = [(r["value"], r["step"]) for r in records(metrics_file)]
    assert got == [(0.5, 7), (-3.0, 8), (1.0, None), (2.5, 9), (None, 10)]
    with pytest.raises(ValueError, match=r"^log_metric\('np'\): value ndarray cannot be made a float: "):
        log_metric("np", numpy.array([1.0, 2.0]))


@needs_modules("torch")
def test_zero_dimensional_tensors(metrics_file):
    import torch

    assert log_metric("t", torch.tensor(0.125), step=torch.tensor(4))
    assert [(r["value"], r["step"]) for r in records(metrics_file)] == [(0.125, 4)]
    with pytest.raises(ValueError, match=r"^log_metric\('t'\): value Tensor cannot be made a float: only one"):
        log_metric("t", torch.tensor([1.0, 2.0]))


@pytest.mark.parametrize("step, error, words", [
    (-1, ValueError, "log_metric('loss'): step must not be negative, got -1"),
    (1.0, TypeError, "log_metric('loss'): step must be None or an int (a numpy integer too), not float (1.0)"),
    ("3", TypeError, "not str ('3')"),
    (True, TypeError, "log_metric('loss'): step must be None or an int, not bool"),
])
def test_bad_steps_are_refused(metrics_file, step, error, words):
    with pytest.raises(error) as raised:
        log_metric("loss", 1.0, step=step)
    assert words in str(raised.value)
    assert not metrics_file.exists()


# Threads of the parent and of forked children (as a DataLoader's workers)
# write long lines into one file at once.
FORK_AND_THREADS = r"""
import os, sys, threading
from davincirunsdk import metrics
from davincirunsdk.metrics import log_metric

N = int(sys.argv[1])
PAD = "x" * 180  # lines of about 300 bytes

def work(tag):
    for i in range(N):
        assert log_metric("%s.%s" % (tag, PAD), float(i), step=i)

def threads(prefix, count):
    started = [threading.Thread(target=work, args=("%s-t%d" % (prefix, t),)) for t in range(count)]
    for t in started:
        t.start()
    for t in started:
        t.join()

assert log_metric("parent", 0.0)  # opened before the forks: the children open their own
children = []
for c in range(3):
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            threads("child%d" % c, 2)
            code = 0 if metrics._sink.pid == os.getpid() else 4
        finally:
            os._exit(code)
    children.append(pid)
threads("parent", 3)
codes = [os.waitpid(pid, 0)[1] for pid in children]
print(codes)
"""


def test_threads_and_forked_children_append_whole_lines(metrics_file, tmp_path):
    n = 2000
    proc = subprocess.run(python_command(FORK_AND_THREADS) + [str(n)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "[0, 0, 0]\n", proc.stderr  # each child wrote through a file it opened itself
    lines = metrics_file.read_bytes().split(b"\n")
    assert lines[-1] == b""
    got = {}
    for line in lines[:-1]:
        record = json.loads(line)  # every line whole: none cut, none interleaved
        got.setdefault(record["name"].split(".")[0], []).append(record["step"])
    tags = ["parent-t%d" % t for t in range(3)] + ["child%d-t%d" % (c, t) for c in range(3) for t in range(2)]
    assert sorted(got) == sorted(tags + ["parent"])
    for tag in tags:
        assert got[tag] == list(range(n)), tag  # in order within a thread, none lost


def test_a_full_disk_returns_false_and_warns_once(monkeypatch):
    monkeypatch.setattr(metrics, "_sink", metrics._Sink())
    monkeypatch.setenv("DAVINCIRUN_METRICS_FILE", "/dev/full")  # every write(2) fails with ENOSPC
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert log_metric("loss", 1.0) is False
        assert log_metric("loss", 2.0) is False
    assert [w.category for w in caught] == [RuntimeWarning]
    text = str(caught[0].message)
    assert text.startswith("davincirunsdk.log_metric: cannot write /dev/full ([Errno 28] No space left on device)")
    assert "training goes on; this warning is not repeated" in text
    assert caught[0].filename == __file__  # it points at the caller's line


def test_a_removed_run_directory_returns_false_and_is_not_made_again(tmp_path, monkeypatch):
    monkeypatch.setattr(metrics, "_sink", metrics._Sink())
    monkeypatch.setattr(metrics, "CHECK_SECONDS", 0.0)  # look at the file at every call
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.setenv("DAVINCIRUN_METRICS_FILE", str(run / "metrics" / "rank_0.jsonl"))
    assert log_metric("loss", 1.0)
    # The metrics folder removed while the job runs: made again, the line not lost in a deleted file.
    shutil.rmtree(str(run / "metrics"))
    assert log_metric("loss", 2.0)
    assert [r["value"] for r in records(run / "metrics" / "rank_0.jsonl")] == [2.0]
    # The whole run directory removed: nothing is made, False, one warning.
    shutil.rmtree(str(run))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert log_metric("loss", 3.0) is False
        assert log_metric("loss", 4.0) is False
    assert len(caught) == 1 and "No such file or directory" in str(caught[0].message)
    assert not run.exists()
    # A path through a file: not a folder.
    (tmp_path / "plain").write_text("")
    monkeypatch.setenv("DAVINCIRUN_METRICS_FILE", str(tmp_path / "plain" / "metrics" / "rank_0.jsonl"))
    assert log_metric("loss", 5.0) is False


def test_the_module_needs_nothing_but_the_standard_library(tmp_path):
    """metrics.py loaded alone, outside its package: it works, and imports
    neither the native core nor numpy or torch."""
    code = (
        "import importlib.util, json, os, sys\n"
        "before = set(sys.modules)\n"
        "spec = importlib.util.spec_from_file_location('m', %r)\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "os.environ['DAVINCIRUN_METRICS_FILE'] = %r\n"
        "print(m.log_metric('x', 1), json.dumps(sorted(set(sys.modules) - before)))\n"
    ) % (os.path.join(REPO, "python", "davincirunsdk", "metrics.py"), str(tmp_path / "rank_0.jsonl"))
    env = {k: v for k, v in os.environ.items() if k not in ("RANK_ID", "RANK")}
    proc = subprocess.run(python_command(code), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    written, loaded = proc.stdout.split(" ", 1)
    assert written == "True"
    loaded = [name for name in json.loads(loaded) if name != "m"]
    assert not [name for name in loaded if name.split(".")[0] in ("davincirunsdk", "numpy", "torch")], loaded
    assert records(tmp_path / "rank_0.jsonl")[0]["rank"] == 0  # from the file's name when RANK_ID is unset
