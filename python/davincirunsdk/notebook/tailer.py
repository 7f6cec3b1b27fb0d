"""``davincirunsdk.notebook.tailer`` of davincirunsdk 0.1.x: following the
ranks' log files into a notebook cell (with ``sh`` and ``tornado``). Not
carried over: the names import, using them raises
:class:`~davincirunsdk.errors.NotCarriedOverError`."""

from .._not_carried_over import stand_in_class, stand_in_function

_INSTEAD = ("start_distributed_train() and start_and_wait_distributed_train() show every rank's lines, prefixed "
            "[rank N], in the cell (output_notebook=None, the default); a failure's DistributedRuntimeError carries "
            "the failed rank's log_file and log_tail")

tail = stand_in_function("davincirunsdk.notebook.tailer.tail", _INSTEAD)
TailManager = stand_in_class("davincirunsdk.notebook.tailer.TailManager", _INSTEAD)
LogRecorder = stand_in_class("davincirunsdk.notebook.tailer.LogRecorder", _INSTEAD)

__all__ = ["LogRecorder", "TailManager", "tail"]
