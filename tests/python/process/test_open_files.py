"""The open-file limit: a job needs about 4 descriptors per rank in its
supervisor. Under the usual soft limit of 1,024 (with a higher hard limit)
the supervisor raises its own soft limit and gives every rank the one it
found; a hard limit too low for the job is refused before any rank starts,
saying how many ranks fit."""

import os
import resource
import shutil
import subprocess

import pytest
from conftest import MARKER_VARIABLE

DAVINCIRUN = shutil.which("davincirun")
pytestmark = pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")

SOFT, HARD = resource.getrlimit(resource.RLIMIT_NOFILE)


def run_with_limit(args, job_env, cwd, soft, hard, timeout=120):
    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    marker = ["--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE])]
    return subprocess.run([DAVINCIRUN] + marker + list(args), cwd=str(cwd), stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=timeout,
                          preexec_fn=limit)


@pytest.mark.skipif(HARD != resource.RLIM_INFINITY and HARD < 4200, reason="the hard limit is below 4,200")
def test_1024_ranks_under_a_soft_limit_of_1024(tmp_path, rank_table, job_env):
    logs = tmp_path / "logs"
    proc = run_with_limit(["-r", rank_table(1024), "-l", str(logs), "/bin/sh", "-c", "ulimit -n"], job_env, tmp_path,
                          1024, HARD)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_dir = logs / "latest"
    logs = [name for name in os.listdir(str(run_dir)) if name.startswith("rank_") and name.endswith(".log")]
    limits = [(run_dir / name).read_text() for name in logs]
    assert len(limits) == 1024
    assert set(limits) == {"1024\n"}  # each rank has the limit davincirun was started with


def test_a_hard_limit_too_low_is_refused_before_any_rank_starts(tmp_path, rank_table, job_env):
    started = tmp_path / "started"
    proc = run_with_limit(["-r", rank_table(300), "-l", str(tmp_path / "logs"), "/bin/sh", "-c",
                           "touch %s" % started], job_env, tmp_path, 1024, 1024)
    assert proc.returncode != 0
    assert "300 ranks need about 1264 open files (4 per rank)" in proc.stderr
    assert "at most 1024 (its hard limit, `ulimit -Hn`): at most 240 ranks fit" in proc.stderr
    assert not started.exists()
    assert not (tmp_path / "logs").exists() or not any((tmp_path / "logs").iterdir())  # nothing ran: no run dir
