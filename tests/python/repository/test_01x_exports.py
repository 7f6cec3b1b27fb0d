"""Every public name davincirunsdk 0.1.5 shipped (exports_0_1_5.txt,
generated from its wheel by scripts/list_01x_exports.py) imports from this
package; the ones that still mean something work, the others raise
NotCarriedOverError naming what replaces them."""

import importlib
import os

import pytest

import davincirunsdk
from davincirunsdk.errors import DavincirunError, NotCarriedOverError

HERE = os.path.dirname(os.path.abspath(__file__))
LIST = os.path.join(HERE, "exports_0_1_5.txt")
WHEEL = "/tmp/old01/wheel"  # the unpacked 0.1.5 wheel, where it exists

# The names that have no meaning any more: each use raises NotCarriedOverError.
NOT_CARRIED_OVER = {
    "davincirunsdk.common": {"OpEnv", "SigHandler"},
    "davincirunsdk.manager": {"AscendVersionManager", "BatchLogManager", "FMKManager", "Manager", "OpManager",
                              "SlogdManager"},
    "davincirunsdk.notebook.manager": {"AscendVersionManager", "BatchLogManager", "FMKManager", "Manager",
                                       "OpManager", "SlogdManager"},
    "davincirunsdk.fmk": {"FMK"},
    "davincirunsdk.notebook.fmk": {"FMK"},
    "davincirunsdk.sdr": {"RouteHelper"},
    "davincirunsdk.split_log": {"init_parser", "parse_log"},
    "davincirunsdk.upload_tail_log": {"AscendLogFile", "AscendLogFilePidCollector", "collect_latest_n_log",
                                      "generate_limited_lines_pid_log_file", "get_new_log_file_name",
                                      "get_tmp_log_dir", "init_parser", "print_args", "tail_append_to_file"},
    "davincirunsdk.notebook.tailer": {"LogRecorder", "TailManager", "tail"},
}


def exports():
    with open(LIST) as f:
        rows = [line.split() for line in f if line.strip() and not line.startswith("#")]
    return [(module, name) for module, name in rows]


def test_the_list_is_the_release():
    rows = exports()
    assert len(rows) == 71 and len({m for m, _ in rows}) == 17
    assert ("davincirunsdk.common", "RankTableEnv") in rows and ("davincirunsdk.notebook.cli", "-") in rows


@pytest.mark.skipif(not os.path.isdir(os.path.join(WHEEL, "davincirunsdk")), reason="the 0.1.5 wheel is not unpacked")
def test_the_list_is_what_the_generator_reads_from_the_wheel():
    import subprocess
    import sys

    from conftest import REPO

    done = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "list_01x_exports.py"), WHEEL],
                          capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["%s %s" % row for row in exports()]


@pytest.mark.parametrize("module,name", exports(), ids=lambda value: value)
def test_each_name_imports(module, name):
    imported = importlib.import_module(module)
    if name == "-":
        return
    value = getattr(imported, name)
    assert name in imported.__all__
    if name in NOT_CARRIED_OVER.get(module, ()):
        with pytest.raises(NotCarriedOverError) as raised:
            value()
        assert isinstance(raised.value, DavincirunError) and isinstance(raised.value, NotImplementedError)
        assert raised.value.replacement and raised.value.replacement in str(raised.value)
        assert "0.1.x" in str(raised.value) and raised.value.name.endswith(name)


def test_a_stand_in_class_refuses_every_use_but_introspection():
    from davincirunsdk.common import OpEnv
    from davincirunsdk.manager import FMKManager

    with pytest.raises(NotCarriedOverError, match="start_distributed_train"):
        FMKManager(None)
    with pytest.raises(NotCarriedOverError, match=r"OpEnv\.ide_mode .*not carried over"):
        OpEnv.ide_mode()
    with pytest.raises(NotCarriedOverError):
        getattr(OpEnv, "MA_ALGORITHM_OPERATOR")  # noqa: B009 (reading it is the use)
    assert not hasattr(OpEnv, "__wrapped__")  # inspect, mock and pytest still see an ordinary class


def test_the_names_that_still_mean_something_work(tmp_path, monkeypatch):
    from davincirunsdk import rank_table
    from davincirunsdk.common import BatchEnv, ModelArts, ModelArtsLog, RankTableEnv, logo
    from davincirunsdk.notebook.utils import fsync_dir, init_log, is_in_notebook

    assert RankTableEnv.RANK_TABLE_FILE == "RANK_TABLE_FILE"
    assert RankTableEnv.RANK_TABLE_FILE_V1 == "RANK_TABLE_FILE_V_1_0"
    assert RankTableEnv.RANK_TABLE_FILE_DEFAULT_VALUE == rank_table.DEFAULT_RANK_TABLE_PATHS[0]
    monkeypatch.delenv("RANK_TABLE_FILE", raising=False)
    assert RankTableEnv.get_rank_table_file_path() == "/user/config/jobstart_hccl.json"
    monkeypatch.setenv("RANK_TABLE_FILE", str(tmp_path))
    assert RankTableEnv.get_rank_table_file_path() == str(tmp_path / "jobstart_hccl.json")
    (tmp_path / "t.json").write_text("{}")
    monkeypatch.setenv("RANK_TABLE_FILE", str(tmp_path / "t.json"))
    assert RankTableEnv.get_rank_table_file_path() == str(tmp_path / "t.json")
    RankTableEnv.set_rank_table_env("/x/hccl.json")
    assert os.environ["RANK_TABLE_FILE"] == "/x/hccl.json"
    with pytest.raises(NotCarriedOverError, match="RANK_TABLE_FILE"):
        RankTableEnv.get_rank_table_v1_file_dir()

    monkeypatch.delenv("BATCH_TASK_CURRENT_INSTANCE", raising=False)
    monkeypatch.setenv("MA_CURRENT_INSTANCE_NAME", "job-x-1")
    monkeypatch.setenv("MA_CURRENT_HOST_IP", "192.0.2.1")
    assert (ModelArts.get_current_instance_name(), ModelArts.get_current_host_ip()) == ("job-x-1", "192.0.2.1")
    monkeypatch.setenv("BATCH_TASK_CURRENT_INSTANCE", "pod-0")
    assert ModelArts.get_current_instance_name() == BatchEnv.get_pod_name() == "pod-0"
    monkeypatch.setenv("BATCH_TASK_LOG_PATH", str(tmp_path))
    assert BatchEnv.get_batch_stdout_log() == str(tmp_path / "stdout.log")

    logger = init_log()
    assert logger is ModelArtsLog.get_modelarts_logger() and logger.name == logo == "ModelArts"
    assert init_log() is logger and len(logger.handlers) == 1
    assert is_in_notebook() is False
    fsync_dir(str(tmp_path))
    with pytest.raises(OSError):
        fsync_dir(str(tmp_path / "t.json"))


def test_the_0_1_x_conftest_import_works():
    # 0.1.x's own tests/conftest.py began with this line.
    from davincirunsdk.common import RankTableEnv

    assert callable(RankTableEnv.get_rank_table_file_path)


def test_the_davincirun_module_runs_the_program(monkeypatch):
    from davincirunsdk import davincirun

    try:
        path = davincirun.program()
    except davincirunsdk.LaunchConfigError:
        pytest.skip("no davincirun program installed")
    assert os.path.basename(path) == "davincirun" and os.access(path, os.X_OK)
    calls = []

    def execv(program, argv):
        calls.append((program, argv))
        raise SystemExit(0)

    monkeypatch.setattr(os, "execv", execv)
    monkeypatch.setattr("sys.argv", ["davincirun", "train.py", "--lr", "0.1"])
    with pytest.raises(SystemExit):
        davincirun.main()
    assert calls == [(path, [path, "train.py", "--lr", "0.1"])]
