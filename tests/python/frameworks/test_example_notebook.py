"""examples/notebook.ipynb, the notebook tutorial, run for real: every cell
in a real Jupyter kernel (ipykernel 7, from scripts/notebook_env.sh), from a
copy of examples/ as its working directory, so its logs stay out of the
source tree. It trains the digits classifier on 4 ranks (PyTorch DDP, gloo on
the CPU) and then makes one rank fail.

One kernel is enough here: how rank output reaches a cell under ipykernel 6
and 7 is tested in test_notebook.py, and this notebook takes half a minute.
The kernel imports torch and scikit-learn from the interpreter that made its
venv (its venv sees that interpreter's site-packages) and davincirunsdk from
its own venv, the wheel built from this tree."""

import os
import re
import shutil
import subprocess
import time

import pytest
from conftest import MARKER_VARIABLE, REPO, needs_modules, processes_with_marker
from notebook_support import (
    SETUP_SCRIPT,
    cell_errors,
    cell_text,
    execute_notebook,
    kernel_python,
    strip_ansi,
)

# Real Jupyter kernels (scripts/notebook_env.sh): run with -m notebook, leave out with -m "not notebook".
pytestmark = [pytest.mark.notebook, needs_modules("torch", "sklearn")]

EXAMPLES = os.path.join(REPO, "examples")
NOTEBOOK = "notebook.ipynb"
EPOCHS = 3  # what the notebook's training cell asks for


def kernel_imports(python):
    """Where the kernel's interpreter finds davincirunsdk, torch and
    scikit-learn (None: not found); nothing is imported but davincirunsdk."""
    code = (
        "import importlib.util as u, davincirunsdk\n"
        "print(davincirunsdk.__file__)\n"
        "for name in ('torch', 'sklearn'):\n"
        "    spec = u.find_spec(name)\n"
        "    print(spec.origin if spec else None)\n"
    )
    done = subprocess.run([python, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert done.returncode == 0, "the kernel's interpreter cannot import davincirunsdk:\n" + done.stdout
    found = done.stdout.split("\n")[-4:-1]
    return dict(zip(("davincirunsdk", "torch", "sklearn"), (None if f == "None" else f for f in found)))


def rank_lines(text):
    """{rank: [its lines, without the "[rank N] " prefix]} of a cell's output."""
    ranks = {}
    for line in text.splitlines():
        match = re.match(r"\[rank (\d+)\] (.*)$", line)
        if match:
            ranks.setdefault(int(match.group(1)), []).append(match.group(2))
    return ranks


@pytest.mark.parametrize("kernel_name", ["davincirun-ipykernel7"], indirect=True)
def test_example_notebook_trains_on_four_ranks(kernel_name, tmp_path, job_env):
    import nbformat

    # The kernel: its venv's davincirunsdk (the current wheel: the fixture
    # checked its record), torch and scikit-learn visible.
    python = kernel_python(kernel_name)
    venv = os.path.realpath(os.path.dirname(os.path.dirname(python)))
    found = kernel_imports(python)
    assert os.path.realpath(found["davincirunsdk"]).startswith(venv + os.sep), (
        "kernel %s imports davincirunsdk from %s, not from its venv: run bash %s"
        % (kernel_name, found["davincirunsdk"], SETUP_SCRIPT))
    missing = [name for name in ("torch", "sklearn") if found[name] is None]
    assert not missing, "kernel %s cannot import %s (its venv should see the site-packages of the " \
        "interpreter that made it): run bash %s" % (kernel_name, ", ".join(missing), SETUP_SCRIPT)

    # The notebook as it is shipped: no outputs, a kernel every Jupyter has.
    nb = nbformat.read(os.path.join(EXAMPLES, NOTEBOOK), as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    code_cells = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert [(cell.outputs, cell.execution_count) for cell in code_cells] == [([], None)] * len(code_cells)

    # Run in a copy of examples/, as Jupyter runs a notebook: in its directory.
    work = tmp_path / "examples"
    shutil.copytree(EXAMPLES, work, ignore=shutil.ignore_patterns("log", "__pycache__", ".ipynb_checkpoints"))
    started = time.monotonic()
    executed = execute_notebook(nb, kernel_name, cwd=work, env=job_env, timeout=300)
    elapsed = time.monotonic() - started
    print("notebook executed in %.1f s" % elapsed)

    cells = {cell.id: cell for cell in executed.cells}
    assert {cell_id: cell_errors(cell) for cell_id, cell in cells.items() if cell.cell_type == "code"} == {
        cell_id: [] for cell_id in ("setup", "rank-table", "train", "accuracy", "failure")}
    text = {cell_id: strip_ansi(cell_text(cell)) for cell_id, cell in cells.items() if cell.cell_type == "code"}

    # The ranks run the kernel's interpreter.
    assert "kernel interpreter: %s\n" % python in text["setup"]
    assert "[rank" not in text["setup"]

    assert text["rank-table"].splitlines() == [
        "format 1.0, status completed, world size 4",
        "server 127.0.0.1:",
    ] + ["  device %d -> rank %d" % (i, i) for i in range(4)]

    # Training: every rank's lines, live, in the training cell, every epoch.
    training = rank_lines(text["train"])
    assert sorted(training) == [0, 1, 2, 3], text["train"]
    for rank, lines in training.items():
        assert lines[0].startswith("rank %d/4: DEVICE_ID=%d (running on CPU)" % (rank, rank))
        epochs = [int(m.group(1)) for m in (re.match(r"rank %d epoch +(\d+)/%d: train loss" % (rank, EPOCHS), line)
                                            for line in lines) if m]
        assert epochs == list(range(1, EPOCHS + 1)), lines
    [shown] = [line for line in training[0] if line.startswith("final test accuracy: ")]
    assert "replicas in sync: True" in training[0]
    assert text["train"].splitlines()[-1] == "exit code: 0"

    # The accuracy, read back from rank 0's log.
    accuracy_text = text["accuracy"]
    match = re.search(r"^final test accuracy: ([0-9.]+)$", accuracy_text, re.M)
    assert match, accuracy_text
    assert float(match.group(1)) > 0.85, accuracy_text  # chance is 0.10
    assert shown.startswith("final test accuracy: %s " % match.group(1))  # the same as shown live
    for rank in range(4):
        assert "rank %d (device %d): exit code 0\n" % (rank, rank) in accuracy_text
    assert "[rank" not in accuracy_text

    # The failure: rank 1 raised, the others were stopped, only rank 0 was shown.
    failure = text["failure"]
    assert "rank 1 failed with exit code 1; every other rank was stopped\n" in failure, failure
    assert "RuntimeError: rank 1: injected failure at epoch 2 (--fail-at-epoch)" in failure
    assert sorted(rank_lines(failure)) == [0], failure
    assert rank_lines(failure)[0][0].startswith("rank 0/4: DEVICE_ID=0")
    [log_file] = re.findall(r"^its log: (.*)$", failure, re.M)
    assert os.path.dirname(os.path.dirname(os.path.realpath(log_file))) == os.path.realpath(work / "log")
    assert os.path.basename(log_file) == "rank_1.device_1.log"

    # The logs went to the copy: two runs, log/latest the failed one.
    runs = sorted(entry.name for entry in (work / "log").iterdir() if entry.name != "latest")
    assert len(runs) == 2, runs
    assert os.path.realpath(work / "log" / "latest") == os.path.realpath(work / "log" / runs[-1])

    # Nothing of the jobs (nor the kernel, which carried the marker too) is left.
    marker = job_env[MARKER_VARIABLE]
    deadline = time.monotonic() + 10.0
    left = processes_with_marker(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = processes_with_marker(marker)
    assert left == [], "processes of the notebook's jobs still alive: %s" % left
