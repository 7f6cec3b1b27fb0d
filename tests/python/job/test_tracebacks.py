"""Errors of the public functions are raised as theirs: the traceback holds
the caller's frames and one frame of davincirunsdk, the function called, not
the library's inner frames (a notebook shows each frame with lines of its
source). The notebook side is in test_notebook.py."""

import os
import traceback

import pytest
from conftest import python_command

import davincirunsdk
from davincirunsdk import DistributedRuntimeError, LaunchConfigError, OptionTypeError, SpawnError

PACKAGE = os.path.dirname(os.path.abspath(davincirunsdk.__file__))


def library_frames(error):
    """The functions of davincirunsdk in `error`'s traceback, outermost first."""
    return [frame.name for frame in traceback.extract_tb(error.__traceback__)
            if os.path.abspath(frame.filename).startswith(PACKAGE + os.sep)]


@pytest.mark.parametrize("case", ["no_table", "wrong_type", "not_found", "rank_fails"])
def test_public_errors_show_one_frame_of_the_library(tmp_path, rank_table, job_env, monkeypatch, case):
    monkeypatch.delenv("RANK_TABLE_FILE", raising=False)
    common = dict(env=job_env, log_dir=str(tmp_path / "log"), output_notebook=False)
    call, expected = {
        "no_table": (lambda: davincirunsdk.start_distributed_train(["true"], **common), LaunchConfigError),
        "wrong_type": (lambda: davincirunsdk.start_and_wait_distributed_train(
            ["true"], rank_table=rank_table(1), ranks_to_show="0", **common), OptionTypeError),
        "not_found": (lambda: davincirunsdk.start_and_wait_distributed_train(
            ["davincirun-no-such-command"], rank_table=rank_table(1), **common), SpawnError),
        "rank_fails": (lambda: davincirunsdk.start_and_wait_distributed_train(
            python_command("import sys; sys.exit(3)"), rank_table=rank_table(2), **common), DistributedRuntimeError),
    }[case]
    with pytest.raises(expected) as info:
        call()
    names = library_frames(info.value)
    assert len(names) == 1 and names[0] in ("start_distributed_train", "start_and_wait_distributed_train"), names
    # The line a traceback shows of that frame says what it does, no linter's note.
    shown = "".join(traceback.format_exception(type(info.value), info.value, info.value.__traceback__))
    assert "noqa" not in shown and "#" not in shown.split("raise ")[-1].split("\n")[0], shown
    # Nothing else is printed with it ("During handling of the above exception...").
    assert info.value.__cause__ is None and (info.value.__context__ is None or info.value.__suppress_context__)


def test_wait_and_its_0_1_form_raise_as_their_own(tmp_path, rank_table, job_env):
    job = davincirunsdk.start_distributed_train(python_command("import sys; sys.exit(4)"), rank_table=rank_table(1),
                                                env=job_env, log_dir=str(tmp_path / "log"), output_notebook=False)
    with pytest.raises(DistributedRuntimeError) as info:
        davincirunsdk.wait_distributed_train(job)
    assert library_frames(info.value) == ["wait_distributed_train"]
    with pytest.raises(DistributedRuntimeError) as info:
        job.wait()
    assert library_frames(info.value) == ["wait"]
    assert info.value.returncode == 4
