"""The display-width table of the C++ core against the Unicode database it
was generated from (scripts/display_width_table.py)."""

import os
import re
import subprocess
import sys
import unicodedata

import pytest
from conftest import REPO

from davincirunsdk import _core

SCRIPT = os.path.join(REPO, "scripts", "display_width_table.py")
TABLE = os.path.join(REPO, "cpp", "src", "output", "display_width_table.inc")


def table_unicode_version():
    with open(TABLE) as f:
        return re.search(r"Unicode Character\n// Database (\S+) ", f.read()).group(1)


same_unicode = pytest.mark.skipif(
    table_unicode_version() != unicodedata.unidata_version,
    reason="this Python's unicodedata is not the Unicode version the table was generated from")


@same_unicode
def test_the_table_is_what_the_script_writes():
    subprocess.run([sys.executable, SCRIPT, "--check"], check=True)


@same_unicode
def test_every_code_point_has_the_width_the_rules_give():
    sys.path.insert(0, os.path.dirname(SCRIPT))
    try:
        import display_width_table as rules
    finally:
        sys.path.pop(0)
    wrong = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF or cp < 0x20 or 0x7F <= cp < 0xA0:
            continue  # surrogates are no text; control characters take no column
        expected = 0 if rules.is_zero_width(cp) else 2 if rules.is_wide(cp) else 1
        if _core.display_width(chr(cp)) != expected:
            wrong.append((hex(cp), expected))
    assert wrong == [], wrong[:20]


def test_fit_width_in_python():
    assert _core.display_width("\u8bad\u7ec3 50%") == 8
    assert _core.fit_width("\u8bad\u7ec3 50%", 3) == "\u8bad"
    assert _core.fit_width("e\u0301x", 1) == "e\u0301"
