"""Security promises 3 to 6 (see test_security.py), for the files a job writes: nothing planted
in the log directory is followed or written, every file is private whatever the umask, the device
lock directory is absolute, and temporary directories are fresh, private, unpredictable, and
removed without following anything a rank put there."""

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time

import pytest
from conftest import python_command
from security_support import (
    CALLER_WITH_UMASK_0,
    REPORT_FILES,
    assert_private_run_dir,
    assert_victim_dir_untouched,
    assert_victim_file_untouched,
    make_victim_dir,
    make_victim_file,
    needs_cli,
    needs_root,
    run_cli,
    run_job,
    tree,
)

from davincirunsdk import LaunchConfigError, start_distributed_train


@pytest.mark.parametrize("target", ["victim dir", "victim file", "dangling"])
def test_a_planted_latest_symlink_is_replaced_not_followed(tmp_path, rank_table, job_env, target):
    log_dir = tmp_path / "log"
    log_dir.mkdir()
    victim = {"victim dir": lambda: make_victim_dir(tmp_path / "victim"),
              "victim file": lambda: make_victim_file(tmp_path / "victim"),
              "dangling": lambda: tmp_path / "absent"}[target]()
    os.symlink(str(victim), str(log_dir / "latest"))
    job = run_job(["true"], tmp_path, rank_table(1), job_env)
    assert os.readlink(str(log_dir / "latest")) == os.path.basename(job.run_dir)
    if target == "victim dir":
        assert_victim_dir_untouched(victim)
    elif target == "victim file":
        assert_victim_file_untouched(victim)
    else:
        assert not os.path.lexists(str(victim))
    assert sorted(os.listdir(str(log_dir))) == sorted(["latest", os.path.basename(job.run_dir)])


@pytest.mark.parametrize("kind", ["file", "directory"])
def test_a_latest_that_is_not_a_symlink_is_left_alone(tmp_path, rank_table, job_env, kind):
    log_dir = tmp_path / "log"
    log_dir.mkdir()
    latest = log_dir / "latest"
    if kind == "file":
        make_victim_file(latest)
    else:
        make_victim_dir(latest)
    job = run_job(["true"], tmp_path, rank_table(1), job_env)
    assert os.path.isdir(job.run_dir)
    if kind == "file":
        assert_victim_file_untouched(latest)
    else:
        assert_victim_dir_untouched(latest)


def test_symlinks_planted_at_the_predictable_run_directory_names_are_never_used(tmp_path, rank_table, job_env):
    log_dir = tmp_path / "log"
    log_dir.mkdir()
    victim = make_victim_dir(tmp_path / "victim")
    now = time.time()
    planted = []
    # The name is <UTC time>-<job id>, then .1, .2... when taken: plant every
    # name of the next seconds, and the first suffix of each.
    for second in range(-1, 30):
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now + second))
        for name in ("%s-fixed" % stamp, "%s-fixed.1" % stamp):
            os.symlink(str(victim), str(log_dir / name))
            planted.append(name)
    # The rank writes a plog into the directory it makes, as CANN does.
    job = run_job(["sh", "-c", 'mkdir -p "$ASCEND_PROCESS_LOG_PATH" && echo log > "$ASCEND_PROCESS_LOG_PATH/plog.log"'],
                  tmp_path, rank_table(1), job_env,
                  env={"JOB_ID": "fixed"})
    run_dir = os.path.basename(job.run_dir)
    assert run_dir not in planted and run_dir.endswith("-fixed.2")
    assert stat.S_ISDIR(os.lstat(job.run_dir).st_mode)
    assert sorted(os.listdir(job.run_dir)) == [
        "ascend", "events.txt", "job.json", "rank_0.device_0.log", "rank_table.json", "report.html", "summary.json"]
    assert stat.S_ISDIR(os.lstat(os.path.join(job.run_dir, "ascend")).st_mode)  # the plogs' directory, in the new run
    assert_victim_dir_untouched(victim)
    for name in planted:
        assert os.readlink(str(log_dir / name)) == str(victim)


def test_a_log_dir_that_is_a_symlink_is_followed(tmp_path, rank_table, job_env):
    """The user's own choice of directory: the run directory goes into its target."""
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(str(real), str(tmp_path / "link"))
    job = run_job(["true"], tmp_path, rank_table(1), job_env, log_dir=tmp_path / "link")
    assert os.path.dirname(job.run_dir) == str(tmp_path / "link")
    assert sorted(os.listdir(str(real))) == sorted(["latest", os.path.basename(job.run_dir)])


def test_files_are_private_whatever_the_umask_api(tmp_path, rank_table, job_env):
    temp = tmp_path / "tmp"
    temp.mkdir()
    kwargs = {"command": python_command(REPORT_FILES), "log_dir": str(tmp_path / "log"),
              "rank_table": rank_table(2), "env": job_env, "output_notebook": False, "random_cache_dir": True}
    env = dict(os.environ, TMPDIR=str(temp))
    env.pop("MS_COMPILER_CACHE_PATH", None)
    proc = subprocess.run([sys.executable, "-c", CALLER_WITH_UMASK_0, json.dumps(kwargs)], env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    run_dir = proc.stdout.strip().splitlines()[-1]
    assert_private_run_dir(run_dir, ["rank_0.device_0.log", "rank_1.device_1.log"])
    reports = []
    for rank in (0, 1):
        with open(os.path.join(run_dir, "rank_%d.device_%d.log" % (rank, rank))) as f:
            reports.append(json.loads(f.read().split("REPORT=")[1]))
    for report in reports:
        assert report["table"] == os.path.join(run_dir, "rank_table.json")
        assert stat.S_IMODE(report["table_mode"]) == 0o600
        # The compiler cache: a fresh private directory in $TMPDIR, removed afterwards.
        assert stat.S_ISDIR(report["cache_mode"]) and stat.S_IMODE(report["cache_mode"]) == 0o700
        assert os.path.dirname(report["cache"]) == str(temp)
        assert os.path.basename(report["cache"]).startswith("davincirun-ms-cache-")
    assert reports[0]["cache"] == reports[1]["cache"]  # one per job
    assert os.listdir(str(temp)) == []


@needs_cli
def test_files_are_private_whatever_the_umask_cli(tmp_path, rank_table, job_env):
    # preexec_fn rather than subprocess's umask=, which needs CPython 3.9.
    proc = run_cli(["-r", rank_table(2), "true"], job_env, tmp_path, preexec_fn=lambda: os.umask(0))
    assert proc.returncode == 0, proc.stderr
    run_dir = os.path.realpath(str(tmp_path / "log" / "latest"))
    assert_private_run_dir(run_dir, ["rank_0.device_0.log", "rank_1.device_1.log"])


@needs_root
def test_another_user_cannot_read_a_log(tmp_path, rank_table, job_env):
    # A log directory every user can reach, so that only the launcher's own
    # modes stand in the way.
    base = tempfile.mkdtemp(prefix="davincirun-security-")
    try:
        os.chmod(base, 0o755)
        job = run_job(python_command("print('secret token')"), tmp_path, rank_table(1), job_env,
                      log_dir=os.path.join(base, "log"))
        log = job.result.ranks[0].log_path
        control = os.path.join(base, "log", "readable.txt")
        with open(control, "w") as f:
            f.write("public\n")
        os.chmod(control, 0o644)

        def cat_as_nobody(path):
            return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat", path],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, timeout=30, env=dict(os.environ, LC_ALL="C"))

        assert cat_as_nobody(control).stdout == "public\n"  # the mechanism works
        denied = cat_as_nobody(log)
        assert denied.returncode != 0 and "Permission denied" in denied.stderr and denied.stdout == ""
        # The file's own mode suffices, even in a directory opened to everyone.
        os.chmod(job.run_dir, 0o755)
        denied = cat_as_nobody(log)
        assert denied.returncode != 0 and "Permission denied" in denied.stderr and denied.stdout == ""
        for name in ("summary.json", "rank_table.json"):
            assert "Permission denied" in cat_as_nobody(os.path.join(job.run_dir, name)).stderr
    finally:
        shutil.rmtree(base)


def test_init_rank_table_writes_a_private_file_whatever_the_umask(tmp_path, rank_table):
    temp = tmp_path / "tmp"
    temp.mkdir()
    # The modes are read by the process itself: its file is removed when it exits.
    code = ("import json, os\nos.umask(0)\nfrom davincirunsdk import init_rank_table\n"
            "path = init_rank_table(wait_timeout=0)['RANK_TABLE_FILE']\n"
            "print(json.dumps([path, os.lstat(os.path.dirname(path)).st_mode, os.lstat(path).st_mode]))\n")
    paths = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, TMPDIR=str(temp),
                                                                     RANK_TABLE_FILE=rank_table(2)),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=60)
        assert proc.returncode == 0, proc.stderr
        path, directory_mode, file_mode = json.loads(proc.stdout)
        assert os.path.dirname(os.path.dirname(path)) == str(temp)
        assert stat.S_IMODE(directory_mode) == 0o700 and stat.S_IMODE(file_mode) == 0o600
        paths.append(path)
    assert paths[0] != paths[1]  # a directory of its own for each process


@pytest.mark.parametrize("value", ["rel/locks", "locks", "./locks", "~/locks", " /tmp/locks"])
def test_a_relative_lock_dir_is_refused(tmp_path, rank_table, job_env, monkeypatch, value):
    monkeypatch.setenv("DAVINCIRUN_LOCK_DIR", value)
    monkeypatch.chdir(tmp_path)
    table = rank_table(1)
    before = tree(tmp_path)
    with pytest.raises(LaunchConfigError) as info:
        start_distributed_train(["true"], rank_table=table, env=job_env)
    assert "DAVINCIRUN_LOCK_DIR must be an absolute path (or \"off\"), got '%s'" % value in str(info.value)
    assert tree(tmp_path) == before


@needs_cli
def test_cli_refuses_a_relative_lock_dir(tmp_path, rank_table, job_env, monkeypatch):
    monkeypatch.setenv("DAVINCIRUN_LOCK_DIR", "locks")
    proc = run_cli(["-r", rank_table(1), "true"], job_env, tmp_path, text=True)
    assert proc.returncode == 2
    assert "DAVINCIRUN_LOCK_DIR must be an absolute path" in proc.stderr
    assert not (tmp_path / "locks").exists() and not (tmp_path / "log").exists()


@needs_root
def test_a_lock_dir_planted_by_another_user_is_refused_or_never_written_through(tmp_path, rank_table, job_env,
                                                                                monkeypatch):
    """A fresh directory standing for /tmp (mode 1777), where another user
    (nobody) created the lock directory first."""
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    os.chmod(str(shared), 0o1777)
    locks = shared / "davincirun-locks"
    monkeypatch.setenv("DAVINCIRUN_LOCK_DIR", str(locks))
    table = rank_table(1)
    victim = make_victim_dir(tmp_path / "victim")
    os.chown(str(victim), 65534, 65534)
    # A symbolic link to a directory of theirs: refused.
    os.symlink(str(victim), str(locks))
    os.lchown(str(locks), 65534, 65534)
    with pytest.raises(LaunchConfigError, match="is a symbolic link; refusing"):
        start_distributed_train(["true"], log_dir=str(tmp_path / "log"), rank_table=table, env=job_env)
    assert_victim_dir_untouched(victim)
    os.unlink(str(locks))
    # Their directory, writable by anyone and not sticky: refused.
    locks.mkdir()
    os.chown(str(locks), 65534, 65534)
    os.chmod(str(locks), 0o777)
    with pytest.raises(LaunchConfigError, match="world-writable without the sticky bit"):
        start_distributed_train(["true"], log_dir=str(tmp_path / "log"), rank_table=table, env=job_env)
    assert os.listdir(str(locks)) == []
    # Their lock file there, a hard link to a file of theirs: refused, not written.
    os.chmod(str(locks), 0o1777)
    theirs = make_victim_file(tmp_path / "theirs")
    os.chown(str(theirs), 65534, 65534)
    os.chmod(str(theirs), 0o666)
    os.link(str(theirs), str(locks / "device0.lock"))
    with pytest.raises(LaunchConfigError, match="device0.lock' has 2 hard links"):
        start_distributed_train(["true"], log_dir=str(tmp_path / "log"), rank_table=table, env=job_env)
    assert_victim_file_untouched(theirs)
    assert not (tmp_path / "log").exists()
    # Their sticky directory, as when they ran the first job on this machine:
    # shared, and this user's lock file there is this user's own.
    os.unlink(str(locks / "device0.lock"))
    job = run_job(["true"], tmp_path, table, job_env)
    lock_file = os.lstat(str(locks / "device0.lock"))
    assert (lock_file.st_uid, stat.S_IMODE(lock_file.st_mode)) == (0, 0o666)
    assert (locks / "device0.lock").read_text().startswith("pid=%d " % job.supervisor_pid)
    assert_victim_file_untouched(theirs)


def test_cache_dirs_are_fresh_and_unpredictable(tmp_path, rank_table, job_env, monkeypatch):
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.delenv("MS_COMPILER_CACHE_PATH", raising=False)
    code = "import os; print('CACHE=' + os.environ['MS_COMPILER_CACHE_PATH'])"
    seen = []
    for _ in range(3):
        job = run_job(python_command(code), tmp_path, rank_table(1), job_env, random_cache_dir=True)
        with open(job.result.ranks[0].log_path) as f:
            seen.append(f.read().split("CACHE=")[1].strip())
    names = [os.path.basename(path) for path in seen]
    assert len(set(names)) == 3
    for name in names:
        suffix = name[len("davincirun-ms-cache-"):]
        assert name.startswith("davincirun-ms-cache-") and len(suffix) >= 8
    assert os.listdir(str(temp)) == []


@pytest.mark.parametrize("trick", ["replaced by a symlink", "a symlink inside"])
def test_removing_the_cache_dir_never_follows_a_symlink_a_rank_planted(tmp_path, rank_table, job_env, monkeypatch,
                                                                      trick):
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.delenv("MS_COMPILER_CACHE_PATH", raising=False)
    victim = make_victim_dir(tmp_path / "victim")
    if trick == "replaced by a symlink":
        code = ("import os\ncache = os.environ['MS_COMPILER_CACHE_PATH']\n"
                "os.rename(cache, cache + '.moved')\nos.symlink(%r, cache)\n" % str(victim))
    else:
        code = ("import os\ncache = os.environ['MS_COMPILER_CACHE_PATH']\n"
                "os.symlink(%r, os.path.join(cache, 'link'))\n"
                "os.symlink(%r, os.path.join(cache, 'file-link'))\n" % (str(victim), str(victim / "inside")))
    run_job(python_command(code), tmp_path, rank_table(1), job_env, random_cache_dir=True)
    assert_victim_dir_untouched(victim)
    left = os.listdir(str(temp))
    # The symlinks are removed; what the rank moved away is its own business.
    if trick == "a symlink inside":
        assert left == []
    else:
        assert len(left) == 1 and left[0].endswith(".moved")
    for name in left:
        shutil.rmtree(str(temp / name))
