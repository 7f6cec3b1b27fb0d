"""The repository's copy of the rank table corpus matches the shared original.

tests/data/rank_tables is a copy of ../shared/corpus/rank_tables (relative to
the repository root); the C++ tests read the copy, so a drifted copy would
silently test something else.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO

REPO_ROOT = Path(REPO)
COPY = REPO_ROOT / "tests" / "data" / "rank_tables"
SHARED = REPO_ROOT.parent / "shared" / "corpus" / "rank_tables"


def _files(root: Path) -> dict[str, bytes]:
    """Every file under `root`, by path relative to it (POSIX form), with its bytes."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_rank_table_corpus_is_a_byte_identical_copy() -> None:
    if not SHARED.is_dir():
        pytest.skip(f"shared corpus not found at {SHARED} (the upstream corpus is not beside this checkout)")
    assert COPY.is_dir(), f"missing corpus copy {COPY}"

    shared, copy = _files(SHARED), _files(COPY)
    assert shared, f"shared corpus {SHARED} has no files"
    assert sorted(copy) == sorted(shared), (
        f"file sets differ: only in the copy {sorted(set(copy) - set(shared))}, "
        f"only in the shared corpus {sorted(set(shared) - set(copy))}"
    )
    differing = [name for name in shared if copy[name] != shared[name]]
    assert not differing, f"files whose bytes differ from {SHARED}: {differing}"
