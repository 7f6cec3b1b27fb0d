"""The root cause of a failed rank in a real notebook (scripts/notebook_env.sh
kernels): a MindSpore error of a rank whose output was not shown live is in
the exception of the cell and in the status view."""

import html

import pytest
from conftest import MARKER_VARIABLE, processes_with_marker
from notebook_support import cell_displays, cell_errors, cell_text, execute_notebook
from test_root_cause import SHAPE_ERROR, SHAPE_MESSAGE

pytestmark = [pytest.mark.notebook, pytest.mark.mindspore]


def test_a_mindspore_error_of_a_rank_not_shown_is_in_the_cell(kernel_name, tmp_path, rank_table, job_env,
                                                               mindspore_python):
    script = tmp_path / "train.py"
    script.write_text(SHAPE_ERROR)
    call = ("from davincirunsdk import start_and_wait_distributed_train\n"
            "start_and_wait_distributed_train([%r, %r], rank_table=%r, log_dir=%r, env=%r, ranks_to_show=[0], "
            "output_notebook=True)" % (mindspore_python, str(script), rank_table(2), str(tmp_path / "log"), job_env))
    nb = execute_notebook([call], kernel_name, cwd=tmp_path, allow_errors=True, timeout=120)
    [(ename, evalue, traceback)] = cell_errors(nb.cells[0])
    assert ename == "DistributedRuntimeError"
    assert SHAPE_MESSAGE in evalue and "root cause, from its log" in evalue
    assert "C++ Call Stack" not in evalue
    assert "forward pass" not in cell_text(nb.cells[0], displays=False, ansi=False)  # rank 1 was not shown live
    [view] = cell_displays(nb.cells[0])
    lines = view["text/plain"].splitlines()
    assert "root cause (rank 1): " + SHAPE_MESSAGE in lines
    assert any(line.startswith("1 ") and line.endswith(SHAPE_MESSAGE) for line in lines)  # its row
    assert html.escape("root cause (rank 1): " + SHAPE_MESSAGE) in view["text/html"]
    assert processes_with_marker(job_env[MARKER_VARIABLE]) == []
