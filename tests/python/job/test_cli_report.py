"""`davincirun report`: which command lines are the report and which still
launch, where it finds the run, and its errors (a record missing or not one),
each naming the path and exiting 1."""

import os
import shutil
import subprocess

import pytest
from job_records import example, write_run

DAVINCIRUN = shutil.which("davincirun")
pytestmark = pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")


def cli(args, cwd, env=None):
    return subprocess.run([DAVINCIRUN] + list(args), cwd=str(cwd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=60, env=env)


def test_help_names_the_report():
    out = cli(["--help"], ".").stdout
    assert "davincirun report [RUN_DIR | JOB_ID]" in out


def test_report_of_a_run_directory_writes_the_page_privately(tmp_path):
    record = example("failed_4_ranks.json")
    run = write_run(tmp_path / "run", record)
    proc = cli(["report", str(run)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = run / "report.html"
    assert proc.stdout.endswith("report: %s\n" % page)
    assert oct(page.stat().st_mode & 0o777) == "0o600"
    assert proc.stdout.startswith("job %s: failed" % record["job_id"])
    assert "first failure: rank %d" % record["first_failure"]["rank"] in proc.stdout


def test_latest_and_job_id_are_found_in_the_default_log_dir(tmp_path):
    # DAVINCIRUN_CACHE_ROOT=off (conftest): the default log dir is ./log.
    record = example("two_servers_restart.json")
    older = write_run(tmp_path / "log" / ("20261130-000000-" + record["job_id"]), record)
    newer = write_run(tmp_path / "log" / ("20261201-000000-" + record["job_id"]), record)
    os.symlink(older.name, str(tmp_path / "log" / "latest"))
    proc = cli(["report"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith("report: %s\n" % (older / "report.html"))
    proc = cli(["report", record["job_id"]], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith("report: %s\n" % (newer / "report.html"))
    assert "2 runs of job %s: reporting the newest" % record["job_id"] in proc.stderr


@pytest.mark.parametrize("content, says", [(None, "no job record there"), ("{", "not JSON"),
                                           ('{"format": "other/1"}', "/format")])
def test_a_missing_or_bad_record_fails_naming_it(tmp_path, content, says):
    run = tmp_path / "run"
    run.mkdir()
    if content is not None:
        (run / "job.json").write_text(content)
    proc = cli(["report", str(run)], tmp_path)
    assert proc.returncode == 1
    assert str(run / "job.json") in proc.stderr and says in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not (run / "report.html").exists()


def test_no_run_found_fails_naming_where_it_looked(tmp_path):
    proc = cli(["report"], tmp_path)
    assert proc.returncode == 1 and "log/latest" in proc.stderr
    (tmp_path / "log").mkdir()
    proc = cli(["report", "job-00000000"], tmp_path)
    assert proc.returncode == 1 and "no run of job job-00000000" in proc.stderr


def test_anything_else_named_report_still_launches(tmp_path, rank_table, job_env):
    (tmp_path / "report.py").write_text("import sys; print('report.py ran', sys.argv[1:])\n")
    (tmp_path / "data.txt").write_text("x")
    env = dict(os.environ, RANK_TABLE_FILE=rank_table(1), **job_env)
    proc = cli(["report.py", "--epochs", "3"], tmp_path, env)
    assert proc.returncode == 0 and "report.py ran ['--epochs', '3']" in proc.stdout, proc.stderr
    # `report` then a file, an option or two words is a command named report.
    for args in (["report", "data.txt"], ["report", "--epochs", "3"], ["report", "a", "b"], ["--", "report"]):
        proc = cli(args, tmp_path, env)
        assert proc.returncode == 127 and "report" in proc.stderr, (args, proc.stderr)
        assert "cannot make the job report" not in proc.stderr
