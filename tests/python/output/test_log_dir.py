"""A log directory that cannot be used (a file, under a file, a read-only
mount: a typed error before any rank starts) and one that fills up mid-run
(the ranks carry on; the report says which log was cut where). Read-only and
full filesystems are real tmpfs mounts in a private mount namespace
(`unshare --mount`)."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from rank_writer import (
    DAVINCIRUN,
    MiB,
    assert_nothing_ran,
    cli,
    console_by_rank,
    rank_logs,
    read_bytes,
    rejoin,
    side_record,
)

from davincirunsdk import (
    LaunchConfigError,
    start_and_wait_distributed_train,
)

# Runs inside `unshare --mount`: mounts a tmpfs, optionally fills it, runs
# one job through the CLI or the Python API, and reports as JSON what only
# this mount namespace can see (the logs, summary.json).
DRIVER = r'''
import glob, hashlib, json, os, subprocess, sys, time, warnings

cfg = json.load(open(sys.argv[1]))
subprocess.run(["mount", "-t", "tmpfs", "-o", cfg["mount_options"], "tmpfs", cfg["mount"]], check=True)
filler = os.path.join(cfg["mount"], "filler")
if cfg.get("fill") is not None:
    # Take all the space, then give back cfg["fill"] bytes (whole pages).
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError:
        pass
    os.ftruncate(fd, max(0, os.fstat(fd).st_size - cfg["fill"]))
    os.close(fd)
out = {"warnings": [], "returncode": None, "error": None}


def coordinate():
    """Waits until every rank has written everything, frees the filler if
    asked, then lets the ranks exit."""
    if not cfg.get("go"):
        return
    deadline = time.monotonic() + 120
    for rank in range(cfg["ranks"]):
        side = os.path.join(cfg["side_dir"], "rank_%d.side" % rank)
        while time.monotonic() < deadline:
            try:
                if open(side).read().split()[2:] == ["end"]:
                    break
            except (OSError, IndexError):
                pass
            time.sleep(0.02)
    if cfg.get("free_before_end"):
        os.unlink(filler)
    open(cfg["go"], "w").close()


if cfg["front"] == "cli":
    with open(cfg["stdout"], "wb") as stdout:
        proc = subprocess.Popen(cfg["argv"], stdout=stdout, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        coordinate()
        out["stderr"] = proc.communicate(timeout=120)[1].decode("utf-8", "replace")
    out["returncode"] = proc.returncode
else:
    from davincirunsdk import start_distributed_train

    real_stdout = sys.stdout
    sys.stdout = open(cfg["stdout"], "w")  # the console of output_notebook=True: sys.stdout, redirected
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            job = start_distributed_train(**cfg["kwargs"])
            coordinate()
            out["returncode"] = job.wait()
            out["rank_log_errors"] = [r.log_error for r in job.result.ranks]
            out["summary_error"] = job.result.summary_error
            out["run_dir"] = job.run_dir
        out["warnings"] = ["%s: %s" % (w.category.__name__, w.message) for w in caught]
    except Exception as e:
        out["error"] = [type(e).__name__, str(e)]
    finally:
        sys.stdout.close()
        sys.stdout = real_stdout
files = {}
for path in glob.glob(os.path.join(cfg["mount"], "**"), recursive=True):
    if os.path.isfile(path) and os.path.realpath(path) == path and path != filler:  # not via log/latest
        with open(path, "rb") as f:
            data = f.read()
        files[path] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        if path.endswith("summary.json"):
            files[path]["json"] = json.loads(data)
out["files"] = files
out["dirs"] = sorted(p for p in glob.glob(os.path.join(cfg["mount"], "**"), recursive=True) if os.path.isdir(p))
with open(cfg["result"], "w") as f:
    json.dump(out, f)
'''


# ---------------------------------------------------------------- unusable log directory


def unusable_dirs(tmp_path):
    (tmp_path / "a_file").write_text("x")
    return {
        "is a file": (str(tmp_path / "a_file"), "log directory '%s' is not a directory" % (tmp_path / "a_file")),
        "under a file": (str(tmp_path / "a_file" / "log"),
                         "cannot create log directory '%s': Not a directory" % (tmp_path / "a_file" / "log")),
    }


@pytest.mark.parametrize("case", ["is a file", "under a file"])
def test_unusable_log_dir_is_a_config_error_before_any_rank_starts(tmp_path, rank_table, job_env, child, case):
    argv, side = child
    log_dir, message = unusable_dirs(tmp_path)[case]
    with pytest.raises(LaunchConfigError) as info:
        start_and_wait_distributed_train(argv + ["touch", side], log_dir=log_dir, rank_table=rank_table(2),
                                         env=job_env, output_notebook=False, wait_timeout=0)
    assert message in str(info.value)
    assert_nothing_ran(side, job_env)
    if DAVINCIRUN:
        proc = subprocess.run(cli(["-r", rank_table(2), "-l", log_dir] + argv + ["touch", side], job_env),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        assert proc.returncode == 2
        assert message in proc.stderr
        assert_nothing_ran(side, job_env)


def test_missing_log_dir_is_created_like_mkdir_p(tmp_path, rank_table, job_env, child):
    argv, side = child
    log_dir = tmp_path / "new" / "deeper" / "log"
    start_and_wait_distributed_train(argv + ["touch", side], log_dir=str(log_dir), rank_table=rank_table(2),
                                     env=job_env, output_notebook=False, wait_timeout=0)
    assert sorted(os.listdir(side)) == ["rank_0.ran", "rank_1.ran"]
    assert len(rank_logs(str(log_dir / "latest"))) == 2


def run_in_mount_namespace(tmp_path, cfg):
    """Runs DRIVER with `cfg` under `unshare --mount`; returns its report."""
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    cfg = dict(cfg, result=str(tmp_path / "result.json"), mount=str(tmp_path / "mnt"))
    (tmp_path / "mnt").mkdir(exist_ok=True)
    with open(tmp_path / "driver.json", "w") as f:
        json.dump(cfg, f)
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, str(driver),
                           str(tmp_path / "driver.json")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=150)
    assert proc.returncode == 0, proc.stderr
    with open(cfg["result"]) as f:
        return json.load(f)


def run_job_in_mount_namespace(tmp_path, cfg, table, log_dir, command, job_env, output_notebook=False):
    """run_in_mount_namespace for one job of `command`, through the CLI or the
    Python API as cfg["front"] says."""
    if cfg["front"] == "cli":
        cfg = dict(cfg, argv=cli(["-r", table, "-l", log_dir] + command, job_env))
    else:
        cfg = dict(cfg, kwargs=dict(command=command, log_dir=log_dir, rank_table=table, env=job_env,
                                    output_notebook=output_notebook, wait_timeout=0))
    return run_in_mount_namespace(tmp_path, cfg)


@pytest.fixture(scope="module")
def mount_namespaces(tmp_path_factory):
    """Skips unless this process may mount a tmpfs in a private mount namespace."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    where = tmp_path_factory.mktemp("probe")
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "mount", "-t", "tmpfs", "-o", "size=64k",
                           "tmpfs", str(where)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        pytest.skip("cannot mount a tmpfs in a private mount namespace: %s" % proc.stdout.strip())


@pytest.mark.parametrize("front", ["api", "cli"])
@pytest.mark.parametrize("sub", ["", "missing"], ids=["mount point", "missing dir in it"])
def test_read_only_log_dir_is_a_config_error_before_any_rank_starts(
        tmp_path, rank_table, job_env, child, mount_namespaces, front, sub):
    if front == "cli" and DAVINCIRUN is None:
        pytest.skip("the davincirun command is not on PATH")
    argv, side = child
    log_dir = str(tmp_path / "mnt" / sub) if sub else str(tmp_path / "mnt")
    command = argv + ["touch", side]
    cfg = {"mount_options": "ro,size=1m", "front": front, "stdout": str(tmp_path / "console.out")}
    report = run_job_in_mount_namespace(tmp_path, cfg, rank_table(2), log_dir, command, job_env)
    what = ("cannot create log directory '%s'" % log_dir) if sub else ("cannot create run directory '%s/" % log_dir)
    if front == "cli":
        assert report["returncode"] == 2
        message = report["stderr"]
    else:
        assert report["error"][0] == "LaunchConfigError"
        message = report["error"][1]
    assert what in message and "Read-only file system" in message
    assert_nothing_ran(side, job_env)
    assert report["files"] == {}


# ---------------------------------------------------------------- a full filesystem


def fill_job(tmp_path, rank_table, job_env, child, front, free_before_end, fill, ranks=4, size=1 * MiB, mount="1m"):
    argv, side = child
    copies = tmp_path / "copies"
    copies.mkdir()
    go = str(tmp_path / "go")
    log_dir = str(tmp_path / "mnt" / "log")
    command = argv + ["fill", side, str(size), str(copies), go]
    cfg = {"mount_options": "size=" + mount, "front": front, "stdout": str(tmp_path / "console.out"), "fill": fill,
           "go": go, "ranks": ranks, "side_dir": side, "free_before_end": free_before_end}
    report = run_job_in_mount_namespace(tmp_path, cfg, rank_table(ranks), log_dir, command, job_env,
                                        output_notebook=True)
    data = {rank: read_bytes(copies / ("rank_%d.data" % rank)) for rank in range(ranks)}
    return report, data, side


def check_cut_logs(report, data, side):
    """Each log holds a prefix of what its rank wrote; a cut one is reported
    at exactly its size. Returns {rank: (log path, byte)} of the cut logs."""
    logs = {int(os.path.basename(p).split("_")[1].split(".")[0]): (p, f)
            for p, f in report["files"].items() if p.endswith(".log")}
    assert sorted(logs) == sorted(data)
    cut = {}
    for rank, (path, info) in logs.items():
        assert info["sha256"] == hashlib.sha256(data[rank][:info["size"]]).hexdigest()
        assert (len(data[rank]), hashlib.sha256(data[rank]).hexdigest()) == side_record(side, rank)
        if info["size"] < len(data[rank]):
            cut[rank] = (path, info["size"])
    assert cut, "the filesystem never filled up"
    print("logs cut by the full filesystem: %s" % ", ".join("rank %d at byte %d" % (r, cut[r][1]) for r in sorted(cut)))
    return cut


@pytest.mark.parametrize("front", ["cli", "api"])
def test_full_log_filesystem_cuts_logs_not_ranks(tmp_path, rank_table, job_env, child, mount_namespaces, front):
    if front == "cli" and DAVINCIRUN is None:
        pytest.skip("the davincirun command is not on PATH")
    # 4 ranks write 1 MiB each into 768 KiB left free of a 2 MiB tmpfs (a
    # filler holds the other 1.25 MiB, freed once they have written, so that
    # summary.json fits). The ranks having written does not mean the job has
    # read it all: up to a pipe's worth per rank may still reach the logs
    # after the filler is gone, which a smaller filler (256 KiB) could not
    # hold under load.
    report, data, side = fill_job(tmp_path, rank_table, job_env, child, front, free_before_end=True,
                                  fill=768 * 1024, mount="2m")
    assert report["error"] is None
    assert report["returncode"] == 0
    cut = check_cut_logs(report, data, side)
    (summary,) = [f["json"] for p, f in report["files"].items() if p.endswith("summary.json")]
    assert summary["exit_code"] == 0
    assert report.get("summary_error") is None and "cannot write the job summary" not in report.get("stderr", "")
    for entry in summary["ranks"]:
        assert entry["exit_code"] == 0 and entry["output_bytes"] == len(data[entry["rank"]])
        if entry["rank"] in cut:
            path, size = cut[entry["rank"]]
            assert entry["log_error"] == "No space left on device at byte %d" % size
        else:
            assert entry["log_error"] is None
        if front == "api":
            assert report["rank_log_errors"][entry["rank"]] == entry["log_error"]
    messages = report["stderr"] if front == "cli" else "\n".join(report["warnings"])
    for rank, (path, size) in cut.items():
        prefix = "davincirun: warning: " if front == "cli" else "RuntimeWarning: "
        assert "%sthe log of rank %d is incomplete (%s): No space left on device at byte %d" % (
            prefix, rank, path, size) in messages
    # The console is not the filesystem: it got every line.
    shown = console_by_rank(read_bytes(tmp_path / "console.out"))
    for rank in data:
        assert rejoin(shown[rank]) == data[rank]


@pytest.mark.parametrize("front", ["cli", "api"])
def test_summary_that_cannot_be_written_is_reported_not_fatal(
        tmp_path, rank_table, job_env, child, mount_namespaces, front):
    if front == "cli" and DAVINCIRUN is None:
        pytest.skip("the davincirun command is not on PATH")
    # Room for the rank table only: the logs fill the rest, and nothing is
    # freed before the end, so summary.json cannot be written.
    report, data, side = fill_job(tmp_path, rank_table, job_env, child, front, free_before_end=False,
                                  fill=16 * 1024, ranks=2, size=256 * 1024)
    assert report["error"] is None
    assert report["returncode"] == 0
    check_cut_logs(report, data, side)
    assert not [p for p in report["files"] if p.endswith("summary.json")]
    if front == "cli":
        found = re.search(r"\[davincirun\] cannot write the job summary (\S+): No space left on device\n",
                          report["stderr"])
        assert found and os.path.dirname(os.path.dirname(found.group(1))) == str(tmp_path / "mnt" / "log")
    else:
        assert report["summary_error"] == "No space left on device"
        assert "RuntimeWarning: the job summary %s/summary.json could not be written: No space left on device" % (
            report["run_dir"]) in report["warnings"]


@pytest.mark.parametrize("front", ["cli", "api"])
def test_no_room_for_the_rank_table_is_a_config_error_before_any_rank_starts(
        tmp_path, rank_table, job_env, child, mount_namespaces, front):
    if front == "cli" and DAVINCIRUN is None:
        pytest.skip("the davincirun command is not on PATH")
    argv, side = child
    log_dir = str(tmp_path / "mnt" / "log")
    command = argv + ["touch", side]
    cfg = {"mount_options": "size=1m", "front": front, "stdout": str(tmp_path / "console.out"), "fill": 0}
    report = run_job_in_mount_namespace(tmp_path, cfg, rank_table(2), log_dir, command, job_env)
    if front == "cli":
        assert report["returncode"] == 2
        message = report["stderr"]
    else:
        assert report["error"][0] == "LaunchConfigError"
        message = report["error"][1]
    assert "rank_table.json" in message and "No space left on device" in message
    assert_nothing_ran(side, job_env)
    # The run directory it had begun is gone again.
    assert report["files"] == {}
    assert [d for d in report["dirs"] if d.startswith(log_dir + "/")] == []
