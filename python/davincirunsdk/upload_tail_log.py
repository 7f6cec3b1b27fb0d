"""``davincirunsdk.upload_tail_log`` of davincirunsdk 0.1.x: a script
collecting the tails of the Ascend logs for upload. Not carried over: the
names import, using them raises
:class:`~davincirunsdk.errors.NotCarriedOverError`."""

from ._not_carried_over import stand_in_class, stand_in_function

_INSTEAD = ("a failed job's DistributedRuntimeError carries the failed rank's log_tail and root_cause; every rank's "
            "log is in the run directory (log/latest)")
_MODULE = "davincirunsdk.upload_tail_log."

AscendLogFile = stand_in_class(_MODULE + "AscendLogFile", _INSTEAD)
AscendLogFilePidCollector = stand_in_class(_MODULE + "AscendLogFilePidCollector", _INSTEAD)
init_parser = stand_in_function(_MODULE + "init_parser", _INSTEAD)
print_args = stand_in_function(_MODULE + "print_args", _INSTEAD)
collect_latest_n_log = stand_in_function(_MODULE + "collect_latest_n_log", _INSTEAD)
generate_limited_lines_pid_log_file = stand_in_function(_MODULE + "generate_limited_lines_pid_log_file", _INSTEAD)
get_new_log_file_name = stand_in_function(_MODULE + "get_new_log_file_name", _INSTEAD)
get_tmp_log_dir = stand_in_function(_MODULE + "get_tmp_log_dir", _INSTEAD)
tail_append_to_file = stand_in_function(_MODULE + "tail_append_to_file", _INSTEAD)

__all__ = ["AscendLogFile", "AscendLogFilePidCollector", "collect_latest_n_log", "generate_limited_lines_pid_log_file",
           "get_new_log_file_name", "get_tmp_log_dir", "init_parser", "print_args", "tail_append_to_file"]
