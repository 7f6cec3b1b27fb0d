"""Waiting for a rank table: a file still being written is waited for, one
that is finished but broken fails at once (not after the 300 s wait),
naming the file, line and column; a path whose folder does not exist fails
at once, and a misspelled file is waited for with lines naming the name
alike and how not to wait, in the front end's words."""

import json
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from davincirunsdk import RankTableError, start_and_wait_distributed_train
from davincirunsdk.rank_table import generate_rank_table

DAVINCIRUN = shutil.which("davincirun")
needs_cli = pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")

# This machine's table, as a person writes it: one device per line.
TABLE = json.dumps({
    "version": "1.0",
    "server_count": "1",
    "server_list": [{"server_id": "127.0.0.1", "device": [
        {"device_id": "0", "rank_id": "0"},
        {"device_id": "1", "rank_id": "1"},
    ]}],
    "status": "completed",
}, indent=2)


def broken_table():
    """TABLE with the comma after the first device forgotten: the error is on
    the line of the second device, with valid-looking text after it."""
    text = TABLE.replace('"rank_id": "0"\n        },', '"rank_id": "0"\n        }', 1)
    assert text != TABLE
    return text


def dry_run(table, cwd, *extra):
    return subprocess.run([DAVINCIRUN, "--dry-run", "-r", str(table)] + list(extra) + ["true"], cwd=str(cwd),
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                          text=True)


@needs_cli
def test_a_broken_table_fails_at_once_naming_line_and_column(tmp_path):
    table = tmp_path / "hccl.json"
    table.write_text(broken_table())
    start = time.monotonic()
    proc = dry_run(table, tmp_path)  # the default wait: 300 s
    assert time.monotonic() - start < 60
    assert proc.returncode == 2
    # The second device's object, where a comma or ']' was due.
    line = [n for n, text in enumerate(broken_table().splitlines(), 1) if text == "        {"][1]
    assert "davincirun: unusable rank table: %s: not valid JSON at line %d, column 9 (byte " % (table, line) \
        in proc.stderr
    assert "expected ']'" in proc.stderr
    assert "waiting" not in proc.stderr


def test_a_broken_table_fails_at_once_from_python(tmp_path, monkeypatch):
    table = tmp_path / "hccl.json"
    table.write_text(TABLE + "\n}\n")  # complete, then more
    monkeypatch.setenv("RANK_TABLE_FILE", str(table))
    monkeypatch.delenv("RANK_TABLE_FILE_V_1_0", raising=False)
    start = time.monotonic()
    with pytest.raises(RankTableError) as info:
        generate_rank_table(wait_timeout=300)
    assert time.monotonic() - start < 60
    assert info.value.kind == "syntax" and info.value.source == str(table)
    assert "not valid JSON at line %d, column 1" % (TABLE.count("\n") + 2) in str(info.value)


@needs_cli
def test_a_table_written_in_two_halves_is_waited_for(tmp_path):
    table = tmp_path / "hccl.json"
    half = TABLE.index('"device_id": "1"') + 8  # inside a key
    table.write_text(TABLE[:half])
    # Another process finishes the file while davincirun waits, after the
    # second look (1 s in), which prints the first waiting line.
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time
        time.sleep(2.5)
        with open(sys.argv[1], "a") as f:
            f.write(sys.argv[2])
        """), str(table), TABLE[half:]])
    try:
        start = time.monotonic()
        proc = dry_run(table, tmp_path, "--wait-timeout", "60")
        took = time.monotonic() - start
    finally:
        writer.wait(timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "davincirun: waiting for rank table %s: it is not valid JSON yet (not valid JSON at line" % table \
        in proc.stderr
    assert 1.0 < took < 50
    assert "; waited 1 s of 60 s; Ctrl-C stops, --wait-timeout 0 does not wait" in proc.stderr
    assert "rank 1" in proc.stdout


@needs_cli
def test_a_missing_folder_fails_at_once_from_the_cli(tmp_path):
    (tmp_path / "tables").mkdir()
    path = tmp_path / "tabels" / "hccl.json"
    start = time.monotonic()
    proc = dry_run(path, tmp_path)  # the default wait: 300 s
    assert time.monotonic() - start < 30
    assert proc.returncode == 2
    assert proc.stderr == (
        "davincirun: unusable rank table: {path}: cannot open the rank table: the folder {tmp}/tabels does not exist "
        "(the nearest that exists is {tmp}; did you mean {tmp}/tables?); not waited for, as a platform writes its "
        "table into a folder that exists\n".format(path=path, tmp=tmp_path))


@needs_cli
def test_a_misspelled_table_is_waited_for_naming_the_name_alike(tmp_path):
    (tmp_path / "hccl.json").write_text(TABLE)
    path = tmp_path / "hcl.json"
    start = time.monotonic()
    proc = dry_run(path, tmp_path, "--wait-timeout", "3")
    assert time.monotonic() - start < 30
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    # The first line one second in (the second look), and no other before the end.
    assert lines == [
        "davincirun: waiting for rank table %s: it does not exist (did you mean 'hccl.json'?); waited 1 s of 3 s; "
        "Ctrl-C stops, --wait-timeout 0 does not wait" % path,
        "davincirun: unusable rank table: %s: timed out after 3 s waiting for the rank table: it does not exist "
        "(did you mean 'hccl.json'?)" % path,
    ]


def test_python_names_its_own_keyword_for_not_waiting(tmp_path, monkeypatch, capsys):
    (tmp_path / "hccl.json").write_text(TABLE)
    path = tmp_path / "hcl.json"
    monkeypatch.setenv("RANK_TABLE_FILE", str(path))
    monkeypatch.delenv("RANK_TABLE_FILE_V_1_0", raising=False)
    line = ("[davincirun] waiting for rank table %s: it does not exist (did you mean 'hccl.json'?); waited 1 s of 2 s; "
            "Ctrl-C stops, wait_timeout=0 does not wait\n" % path)
    with pytest.raises(RankTableError, match=r"timed out after 2 s .*\(did you mean 'hccl.json'\?\)") as info:
        generate_rank_table(wait_timeout=2)
    assert info.value.kind == "io" and info.value.source == str(path)
    assert capsys.readouterr().err == line
    # A launch says the same (the table is read before anything starts).
    with pytest.raises(RankTableError, match="timed out after 2 s"):
        start_and_wait_distributed_train(["true"], log_dir=str(tmp_path / "log"), rank_table=str(path),
                                         output_notebook=False, wait_timeout=2)
    assert capsys.readouterr().err == line
    assert not (tmp_path / "log").exists()


def test_a_missing_folder_fails_at_once_from_python(tmp_path):
    start = time.monotonic()
    with pytest.raises(RankTableError) as info:
        start_and_wait_distributed_train(["true"], log_dir=str(tmp_path / "log"),
                                         rank_table=str(tmp_path / "nope" / "hccl.json"), output_notebook=False)
    assert time.monotonic() - start < 30
    assert info.value.kind == "io"
    assert "the folder %s/nope does not exist (the nearest that exists is %s)" % (tmp_path, tmp_path) \
        in str(info.value)
