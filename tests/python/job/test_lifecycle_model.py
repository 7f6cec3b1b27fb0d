"""The job's life cycle, cell by cell (docs/architecture.md, "The life
cycle"): the cells come from the code's own table
(davincirunsdk._core.job_transitions()), and every cell that can happen is
driven with real processes (lifecycle_cases*.py): on one server (a job
that restarts included), on two servers of this machine's loopback and in
MindSpore's dynamic-cluster mode.
A cell the table gains without a case fails here, as does a case for a
cell the table says cannot happen. The cases run three at a time."""

import concurrent.futures
import os
import subprocess
import sys
import traceback

import lifecycle_cases_ranks  # noqa: F401 (registers its cases)
import lifecycle_cases_restarts  # noqa: F401 (registers its cases)
import lifecycle_cases_servers  # noqa: F401 (registers its cases)
import pytest
from conftest import REPO
from lifecycle_cases import CASES
from lifecycle_support import Scenario

from davincirunsdk import _core

CELLS = _core.job_transitions()
TOPOLOGY_SERVERS = {"one server": ("127.0.0.1",), "two servers": ("127.0.0.1", "127.0.0.2"),
                    "dynamic cluster": ("127.0.0.1",)}
DEVICES = {"one server": 2, "two servers": 1, "dynamic cluster": 2}


def test_every_cell_that_can_happen_is_driven_and_no_other():
    possible = {(c["state"], c["event"]) for c in CELLS if c["answer"] != "impossible"}
    driven = {(state, event) for (_, state, event) in CASES}
    assert sorted(possible - driven) == [], "cells without a case"
    assert sorted(driven - possible) == [], "cases of cells the table says cannot happen"


def test_every_cell_has_one_answer_and_a_reason():
    assert len(CELLS) == len({(c["state"], c["event"]) for c in CELLS}) == 10 * 25
    for c in CELLS:
        assert c["why"], c
        if c["answer"] in ("proceed", "stop", "escalate"):
            assert c["next"] != c["state"] or c["answer"] == "stop", c
        else:
            assert c["next"] == c["state"], c


def test_the_architecture_document_is_the_table():
    check = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "lifecycle_table.py"), "--check",
                            os.path.join(REPO, "docs", "architecture.md")], stderr=subprocess.PIPE, text=True)
    assert check.returncode == 0, check.stderr


def run_case(key, directory):
    topology = key[0]
    scenario = Scenario(directory, TOPOLOGY_SERVERS[topology], DEVICES[topology])
    try:
        CASES[key](scenario)
        return None
    except BaseException:  # noqa: B902 (the report names what broke)
        return traceback.format_exc()
    finally:
        scenario.close()


def key_id(key):
    topology, state, event = key
    return "%s: %s in %s" % (topology, event, state)


@pytest.fixture(scope="module")
def outcomes(request, tmp_path_factory):
    """Runs the cases the session selected, three at a time; the failure of each, or None."""
    keys = [item.callspec.params["key"] for item in request.session.items
            if item.originalname == "test_cell" and hasattr(item, "callspec")]
    root = tmp_path_factory.mktemp("lifecycle")
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        futures = {key: pool.submit(run_case, key, root / ("%03d" % i)) for i, key in enumerate(keys)}
        return {key: future.result() for key, future in futures.items()}


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(CASES), ids=key_id)
def test_cell(key, outcomes):
    failure = outcomes[key]
    assert failure is None, failure
