"""Security promises, proved on real jobs through the Python API and the
`davincirun` command:

1. no shell ever runs: every rank receives its arguments byte for byte;
2. values from the rank table or the environment never become paths outside
   the log directory;
3. nothing planted in the log directory (symlinks) is followed or written;
4. every file and directory the job writes is private, whatever the umask;
5. the device lock directory is absolute (relative values are refused);
6. temporary directories are fresh, private, unpredictable, and removed
   without following anything a rank put there.

The device lock files themselves are covered by test_device_lock.py and
tests/cpp/test_device_lock.cpp; opening a planted log file or private file
by tests/cpp/test_file_safety.cpp."""

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time

import pytest
from conftest import MARKER_VARIABLE, python_command, write_rank_table

from davincirunsdk import LaunchConfigError, RankTableError, SpawnError, start_distributed_train

DAVINCIRUN = shutil.which("davincirun")
needs_cli = pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (to run a command as another user)")

# A rank program printing its exact argv: /proc/self/cmdline, raw bytes, as hex.
DUMP_ARGV = "import sys\nsys.stdout.write('ARGV=' + open('/proc/self/cmdline', 'rb').read().hex() + '\\n')\n"

LONG_AGO = 1_000_000_000  # mtime given to victim files: any write would change it


def dump_argv_script(tmp_path):
    path = tmp_path / "dump_argv.py"
    path.write_text(DUMP_ARGV)
    return str(path)


def argv_in_log(log_path):
    """The argv a rank reported (see DUMP_ARGV), as a list of bytes."""
    with open(log_path, "rb") as f:
        lines = [line for line in f.read().split(b"\n") if line.startswith(b"ARGV=")]
    assert len(lines) == 1, "the rank did not report its argv once: %r" % lines
    cmdline = bytes.fromhex(lines[0][5:].decode())
    assert cmdline.endswith(b"\0")
    return cmdline[:-1].split(b"\0")


def tricky_arguments(marker_dir):
    """Arguments a shell would interpret; those naming a path in `marker_dir`
    would create a file there if anything ran them."""
    mark = lambda name: os.path.join(str(marker_dir), name)  # noqa: E731
    return [
        "", " ", "two words", "'single quoted'", '"double quoted"', "back\\slash\\", "trailing\\",
        "$(touch %s)" % mark("dollar"), "`touch %s`" % mark("backtick"), "; touch %s" % mark("semicolon"),
        "| touch %s" % mark("pipe"), "&& touch %s" % mark("and"), "x > %s" % mark("redirect"),
        "*", "?", "[a-z]*", "~", "~root/x", "$HOME", "${PATH}", "!!", "#not a comment", "a=b",
        "line one\nline two", "tab\there", "\r\n", "ünïcødé 中文 🚀", "\x1b[31mred\x1b[0m",
        "-leading-dash", "--option=value", "-", "--", "-h", "--help", "-r", "--rank-table",
    ]


def tree(root):
    """Every path below `root` (symlinks not followed), relative, with its kind."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(str(root)):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            found[os.path.relpath(path, str(root))] = stat.S_IFMT(os.lstat(path).st_mode)
    return found


def make_victim_file(path):
    path.write_text("precious\n")
    os.utime(str(path), (LONG_AGO, LONG_AGO))
    return path


def assert_victim_file_untouched(path):
    assert path.read_text() == "precious\n"
    assert os.lstat(str(path)).st_mtime == LONG_AGO


def make_victim_dir(path):
    path.mkdir()
    make_victim_file(path / "inside")
    os.utime(str(path), (LONG_AGO, LONG_AGO))
    return path


def assert_victim_dir_untouched(path):
    assert sorted(os.listdir(str(path))) == ["inside"]
    assert_victim_file_untouched(path / "inside")
    assert os.lstat(str(path)).st_mtime == LONG_AGO


def run_job(command, tmp_path, table, job_env, log_dir=None, **kwargs):
    job = start_distributed_train(command, work_dir=str(tmp_path), log_dir=str(log_dir or tmp_path / "log"),
                                  rank_table=table, env=dict(job_env, **kwargs.pop("env", {})),
                                  output_notebook=False, grace_period=1, **kwargs)
    assert job.wait() == 0
    return job


def run_cli(args, job_env, cwd, **kwargs):
    marker = ["--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE])]
    return subprocess.run([DAVINCIRUN] + marker + list(args), cwd=str(cwd), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60, **kwargs)


# 1. No shell, exact argv -------------------------------------------------


def test_api_list_arguments_reach_every_rank_byte_for_byte(tmp_path, rank_table, job_env):
    markers = tmp_path / "markers"
    markers.mkdir()
    argv = [sys.executable, dump_argv_script(tmp_path)] + tricky_arguments(markers)
    job = run_job(argv, tmp_path, rank_table(2), job_env)
    for rank in job.result.ranks:
        assert argv_in_log(rank.log_path) == [os.fsencode(a) for a in argv]
    assert os.listdir(str(markers)) == []  # nothing ran `touch`
    assert sorted(os.listdir(str(tmp_path))) == ["dump_argv.py", "log", "markers", "rank_table.json"]


def test_api_arguments_that_are_not_utf8_pass_unchanged(tmp_path, rank_table, job_env):
    raw = [b"\xff\xfe not utf-8", b"latin-1 \xe9t\xe9"]
    argv = [sys.executable, dump_argv_script(tmp_path)] + [os.fsdecode(a) for a in raw]
    job = run_job(argv, tmp_path, rank_table(1), job_env)
    assert argv_in_log(job.result.ranks[0].log_path)[2:] == raw
    job = run_job([os.fsencode(a) for a in argv], tmp_path, rank_table(1), job_env)  # bytes work too
    assert argv_in_log(job.result.ranks[0].log_path)[2:] == raw


def test_api_env_values_that_are_not_utf8_pass_unchanged(tmp_path, rank_table, job_env):
    code = "import os; print('VALUES=' + os.environb[b'RAW_A'].hex() + ',' + os.environb[b'RAW_B'].hex())"
    job = run_job(python_command(code), tmp_path, rank_table(1), job_env,
                  env={"RAW_A": b"\xff\xfe $(x) ;", "RAW_B": os.fsdecode(b"caf\xe9\nnext")})
    with open(job.result.ranks[0].log_path) as f:
        assert f.read() == "VALUES=%s,%s\n" % (b"\xff\xfe $(x) ;".hex(), b"caf\xe9\nnext".hex())


@pytest.mark.parametrize("program", [b"/nonexistent/\xff program", b"no-such-program-\xff"])
def test_a_missing_program_named_in_bytes_that_are_not_utf8_is_a_spawn_error(tmp_path, rank_table, job_env,
                                                                            program):
    with pytest.raises(SpawnError) as info:
        start_distributed_train([program, "arg"], log_dir=str(tmp_path / "log"), rank_table=rank_table(1),
                                env=job_env, output_notebook=False)
    assert os.fsdecode(program) in info.value.command and info.value.exit_code == 127
    assert os.fsdecode(program) in str(info.value)


@needs_cli
@pytest.mark.parametrize("separator", [["--"], []], ids=["after --", "after the first non-option"])
def test_cli_arguments_reach_every_rank_byte_for_byte(tmp_path, rank_table, job_env, separator):
    markers = tmp_path / "markers"
    markers.mkdir()
    argv = [os.fsencode(a) for a in [sys.executable, dump_argv_script(tmp_path)] + tricky_arguments(markers)]
    argv.append(b"\xff\xfe not utf-8")
    proc = run_cli(["-r", rank_table(2)] + separator + argv, job_env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    latest = tmp_path / "log" / "latest"
    for rank in (0, 1):
        assert argv_in_log(str(latest / ("rank_%d.device_%d.log" % (rank, rank)))) == argv
    assert os.listdir(str(markers)) == []


def program_named_with_spaces(tmp_path):
    """A directory holding `sys.executable` under a name a shell would split and unquote."""
    bin_dir = tmp_path / "bin dir $(x)"
    bin_dir.mkdir()
    name = "my py 'thon' \"x\""
    os.symlink(os.path.realpath(sys.executable), str(bin_dir / name))
    return bin_dir, name


def test_argv0_with_spaces_and_quotes_by_path_and_from_path(tmp_path, rank_table, job_env):
    bin_dir, name = program_named_with_spaces(tmp_path)
    script = dump_argv_script(tmp_path)
    by_path = [str(bin_dir / name), script, "a b"]
    job = run_job(by_path, tmp_path, rank_table(1), job_env)
    assert argv_in_log(job.result.ranks[0].log_path) == [os.fsencode(a) for a in by_path]
    # Looked up in the ranks' PATH, as execvp would; argv[0] stays as given.
    from_path = [name, script, "a b"]
    job = run_job(from_path, tmp_path, rank_table(1), job_env,
                  env={"PATH": str(bin_dir) + os.pathsep + os.environ.get("PATH", "")})
    assert argv_in_log(job.result.ranks[0].log_path) == [os.fsencode(a) for a in from_path]


def test_string_command_is_split_like_a_shell_but_never_run_by_one(tmp_path, rank_table, job_env):
    markers = tmp_path / "markers"
    markers.mkdir()
    script = dump_argv_script(tmp_path)
    quoted = lambda name: os.path.join(str(markers), name)  # noqa: E731
    command = "%s %s 'a b' \"c d\" e\\ f 'it'\"'\"'s' '' '$(touch %s)' $(touch %s) `touch %s` ';' '*' ~ $HOME" % (
        shlex.quote(sys.executable), shlex.quote(script), quoted("one"), quoted("two"), quoted("three"))
    expected = [sys.executable, script, "a b", "c d", "e f", "it's", "", "$(touch %s)" % quoted("one"),
                "$(touch", quoted("two") + ")", "`touch", quoted("three") + "`", ";", "*", "~", "$HOME"]
    job = run_job(command, tmp_path, rank_table(1), job_env)
    assert argv_in_log(job.result.ranks[0].log_path) == [os.fsencode(a) for a in expected]
    assert os.listdir(str(markers)) == []


@pytest.mark.parametrize("command", ["python 'unterminated", 'python "unterminated', "python trailing\\"])
def test_string_command_that_cannot_be_split_is_refused(tmp_path, rank_table, job_env, command):
    with pytest.raises(LaunchConfigError, match="cannot split the command"):
        start_distributed_train(command, log_dir=str(tmp_path / "log"), rank_table=rank_table(1), env=job_env)
    assert not (tmp_path / "log").exists()


# 2. Paths from data never escape -------------------------------------------


def table_with(tmp_path, device):
    table = {"version": "1.0", "server_count": "1", "status": "completed",
             "server_list": [{"server_id": "127.0.0.1", "device": [device]}]}
    path = tmp_path / "table.json"
    path.write_text(json.dumps(table))
    return str(path)


def assert_created_only_in_log_dir(before, after):
    """Between two tree()s of tmp_path: nothing but deep/er/log (and its parents) and what is in it is new."""
    created = set(after) - set(before)
    assert {"deep", "deep/er", "deep/er/log"} <= created
    assert all(path in ("deep", "deep/er") or path.startswith("deep/er/log") for path in created), created


@pytest.mark.parametrize("field", ["rank_id", "device_id"])
@pytest.mark.parametrize("value", ["../../x", "/etc/passwd", "a/b", "..", ".", "0/../../x", "0 ", "-1", "1e3"])
def test_rank_table_values_that_are_not_numbers_are_refused(tmp_path, job_env, field, value):
    device = {"device_id": "0", "rank_id": "0"}
    device[field] = value
    table = table_with(tmp_path, device)
    before = tree(tmp_path)
    with pytest.raises(RankTableError) as info:
        start_distributed_train(["true"], log_dir=str(tmp_path / "log"), rank_table=table, env=job_env)
    assert info.value.pointer == "/server_list/0/device/0/" + field
    assert tree(tmp_path) == before


def test_a_path_like_server_id_is_only_a_name(tmp_path, job_env):
    server_id = "../../evil/x"
    table = write_rank_table(tmp_path / "table.json", [0], server_id=server_id)
    log_dir = tmp_path / "deep" / "er" / "log"
    before = tree(tmp_path)
    job = run_job(["true"], tmp_path, table, job_env, log_dir=log_dir, server_id=server_id)
    assert os.path.dirname(job.run_dir) == str(log_dir)
    assert_created_only_in_log_dir(before, tree(tmp_path))


@pytest.mark.parametrize("job_id", ["../../escape", "/etc/cron.d/x", "..", ".", "a/b/c", "x\ny\x1b[31m", " "])
@pytest.mark.parametrize("source", ["JOB_ID", "env=", "BATCH_JOB_ID", "MA_VJ_NAME"])
def test_a_job_id_never_becomes_a_path(tmp_path, rank_table, job_env, monkeypatch, job_id, source):
    for name in ("JOB_ID", "BATCH_JOB_ID", "MA_VJ_NAME"):
        monkeypatch.delenv(name, raising=False)
    extra = {}
    if source == "env=":
        extra = {"JOB_ID": job_id}
    else:
        monkeypatch.setenv(source, job_id)
    table = rank_table(1)
    log_dir = tmp_path / "deep" / "er" / "log"
    before = tree(tmp_path)
    job = run_job(python_command("import os; print('JOB_ID=' + os.environ['JOB_ID'])"), tmp_path, table, job_env,
                  log_dir=log_dir, env=extra)
    assert os.path.dirname(job.run_dir) == str(log_dir)
    assert job.job_id and all(c.isalnum() or c in "-_" for c in job.job_id)
    assert os.path.basename(job.run_dir).endswith("-" + job.job_id)
    with open(job.result.ranks[0].log_path) as f:
        assert f.read() == "JOB_ID=%s\n" % job.job_id  # the ranks see the same safe id
    assert_created_only_in_log_dir(before, tree(tmp_path))


def test_a_job_id_too_long_for_a_file_name_is_a_clear_error(tmp_path, rank_table, job_env):
    with pytest.raises(LaunchConfigError, match="cannot create run directory .*: File name too long"):
        start_distributed_train(["true"], log_dir=str(tmp_path / "log"), rank_table=rank_table(1),
                                env=dict(job_env, JOB_ID="j" * 300))
    assert os.listdir(str(tmp_path / "log")) == []


# 3. Symlinks in the log directory ------------------------------------------


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
    job = run_job(["true"], tmp_path, rank_table(1), job_env, env={"JOB_ID": "fixed"})
    run_dir = os.path.basename(job.run_dir)
    assert run_dir not in planted and run_dir.endswith("-fixed.2")
    assert stat.S_ISDIR(os.lstat(job.run_dir).st_mode)
    assert sorted(os.listdir(job.run_dir)) == ["rank_0.device_0.log", "rank_table.json", "summary.json"]
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


# 4. File modes -------------------------------------------------------------

# argv: KWARGS (JSON) for start_distributed_train. Runs the job with umask 0
# and prints its run directory.
CALLER_WITH_UMASK_0 = r"""
import json, os, sys
os.umask(0)
from davincirunsdk import start_distributed_train
job = start_distributed_train(**json.loads(sys.argv[1]))
assert job.wait() == 0
print(job.run_dir)
"""

# What a rank sees of the files the launcher made for it.
REPORT_FILES = r"""
import json, os
cache = os.environ['MS_COMPILER_CACHE_PATH']
table = os.environ['RANK_TABLE_FILE']
print('REPORT=' + json.dumps({'cache': cache, 'cache_mode': os.lstat(cache).st_mode,
                              'table': table, 'table_mode': os.lstat(table).st_mode}))
"""


def assert_private_run_dir(run_dir, log_names):
    assert stat.S_IMODE(os.lstat(run_dir).st_mode) == 0o700
    for name in log_names + ["summary.json", "rank_table.json"]:
        st = os.lstat(os.path.join(run_dir, name))
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, name
    latest = os.path.join(os.path.dirname(run_dir), "latest")
    assert os.readlink(latest) == os.path.basename(run_dir)  # relative: the log dir can move


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
    proc = run_cli(["-r", rank_table(2), "true"], job_env, tmp_path, umask=0)
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
    code = ("import json, os\nos.umask(0)\nfrom davincirunsdk import init_rank_table\n"
            "print(json.dumps(init_rank_table(wait_timeout=0)['RANK_TABLE_FILE']))\n")
    paths = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, TMPDIR=str(temp),
                                                                     RANK_TABLE_FILE=rank_table(2)),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=60)
        assert proc.returncode == 0, proc.stderr
        paths.append(json.loads(proc.stdout))
    for path in paths:
        assert os.path.dirname(os.path.dirname(path)) == str(temp)
        assert stat.S_IMODE(os.lstat(os.path.dirname(path)).st_mode) == 0o700
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    assert paths[0] != paths[1]  # a fresh directory each time


# 5. The device lock directory ----------------------------------------------


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


# 6. Temporary directories --------------------------------------------------


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
