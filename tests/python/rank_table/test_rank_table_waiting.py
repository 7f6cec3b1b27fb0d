"""Waiting for a rank table: a file still being written is waited for, one
that is finished but broken fails at once (not after the 300 s wait),
naming the file, line and column."""

import json
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from davincirunsdk import RankTableError
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
    # Another process finishes the file while davincirun waits.
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time
        time.sleep(1.5)
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
    assert "rank 1" in proc.stdout
