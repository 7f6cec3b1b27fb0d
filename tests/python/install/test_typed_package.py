"""The installed package carries its types: py.typed (PEP 561) and the stub
of its C++ module, so that IDEs and type checkers see every field of the
result objects. (scripts/lint.sh checks that the stub matches the module.)"""

import ast
import os

import davincirunsdk
from davincirunsdk import _core

PACKAGE = os.path.dirname(os.path.abspath(davincirunsdk.__file__))


def test_the_package_is_marked_typed_and_ships_the_module_stub():
    assert os.path.isfile(os.path.join(PACKAGE, "py.typed"))
    with open(os.path.join(PACKAGE, "_core.pyi")) as f:
        stub = ast.parse(f.read())
    classes = {node.name: node for node in stub.body if isinstance(node, ast.ClassDef)}
    # The result objects a caller gets, with their fields.
    for cls, fields in {"JobResult": ["ranks", "first_failure", "stop_reason", "exit_code", "summary_error"],
                        "RankResult": ["rank", "pid", "log_path", "exit_code", "signal", "returncode", "log_error"],
                        "LaunchOptions": ["command", "rank_table", "env", "grace_period", "job_timeout",
                                          "wait_timeout", "ranks_to_show"]}.items():
        assert cls in classes and hasattr(_core, cls)
        defined = {node.name for node in classes[cls].body if isinstance(node, ast.FunctionDef)}
        for field in fields:
            assert field in defined, (cls, field)
            assert hasattr(getattr(_core, cls), field), (cls, field)


def test_public_functions_have_type_hints():
    for name in ("start_distributed_train", "start_and_wait_distributed_train", "wait_distributed_train",
                 "init_rank_table"):
        function = getattr(davincirunsdk, name)
        assert "return" in function.__annotations__, name
