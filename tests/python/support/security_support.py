"""What the security tests share: programs that dump their argv, tricky
arguments, victim files and directories that must stay untouched, and ways to run a job."""

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest
from conftest import MARKER_VARIABLE

from davincirunsdk import start_distributed_train

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


def program_named_with_spaces(tmp_path):
    """A directory holding `sys.executable` under a name a shell would split and unquote."""
    bin_dir = tmp_path / "bin dir $(x)"
    bin_dir.mkdir()
    name = "my py 'thon' \"x\""
    os.symlink(os.path.realpath(sys.executable), str(bin_dir / name))
    return bin_dir, name


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
