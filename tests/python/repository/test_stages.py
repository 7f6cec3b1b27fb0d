"""scripts/test.sh's stages (scripts/stages.sh): every stage runs whatever
became of the ones before, a failing command ends its own stage only, and the
closing table gives each stage's result and seconds, the status saying
whether any failed. And the stage on other CPython versions learns which
ones pyenv lacks from scripts/test_pythons.sh --missing."""

import os
import subprocess

from conftest import REPO


def bash(script, env=None):
    return subprocess.run(["bash", "-c", script], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=env)


def stages(script):
    return bash("set -uo pipefail\nsource scripts/stages.sh\n" + script)


def table_rows(out):
    """The table's rows after its header: name -> (seconds, result)."""
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:3] == ["stage", "seconds", "result"])
    start = lines[header].index("seconds")
    rows = {}
    for line in lines[header + 1:]:
        if not line.strip() or line.endswith("failed"):
            break
        rows[line[:start].strip()] = (int(line[start:start + 7]), line[start + 9:])
    return rows


def test_a_failure_ends_its_stage_and_the_later_stages_run():
    proc = stages("""
first() { echo in first; false; echo not reached; }
run_stage "First stage" first
run_stage "Second" bash -c 'echo second ran; sleep 1'
skip_stage "Third" "no CPython 3.7 from pyenv (pyenv install 3.7 3.13)"
run_stage "Fourth" bash -c 'exit 3'
stage_table
""")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "in first" in proc.stdout and "not reached" not in proc.stdout
    assert "second ran" in proc.stdout
    rows = table_rows(proc.stdout)
    assert list(rows) == ["First stage", "Second", "Third", "Fourth"]
    assert rows["First stage"][1] == "FAILED (exit 1)"
    assert rows["Second"][1] == "passed" and rows["Second"][0] >= 1
    assert rows["Third"] == (0, "skipped: no CPython 3.7 from pyenv (pyenv install 3.7 3.13)")
    assert rows["Fourth"][1] == "FAILED (exit 3)"
    assert proc.stdout.rstrip().endswith("2 of 4 stages failed")


def test_passed_and_skipped_stages_exit_zero_and_a_stage_keeps_its_changes():
    proc = stages("""
moves() { cd /; export STAGE_VARIABLE=set; exit 0; }
run_stage one moves
run_stage two bash -c '[[ -z ${STAGE_VARIABLE:-} ]]'
skip_stage three "not wanted"
[[ $PWD == "%s" ]] || echo "the stage moved the script"
stage_table
""" % REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "moved the script" not in proc.stdout
    rows = table_rows(proc.stdout)
    assert [r[1] for r in rows.values()] == ["passed", "passed", "skipped: not wanted"]
    assert proc.stdout.rstrip().endswith("no stage failed")


def test_missing_pythons_are_named(tmp_path):
    for version in ("3.7.16", "3.13.0", "3.130.1"):
        bin_dir = tmp_path / "versions" / version / "bin"
        bin_dir.mkdir(parents=True)
        (bin_dir / "python3").write_text("#!/bin/sh\n")
        (bin_dir / "python3").chmod(0o755)
    env = dict(os.environ, PYENV_ROOT=str(tmp_path), TEST_PYTHONS="3.7 3.13 3.8 3.130")
    proc = bash("bash scripts/test_pythons.sh --missing", env)
    assert (proc.returncode, proc.stdout) == (0, "3.8\n"), proc.stderr
    env["PYENV_ROOT"] = str(tmp_path / "nothing")
    proc = bash("bash scripts/test_pythons.sh --missing", env)
    assert (proc.returncode, proc.stdout) == (0, "3.7 3.13 3.8 3.130\n"), proc.stderr
