"""The Python caller of one fault-run job: starts it through the public API,
waits, and writes what happened as JSON for fault_checks.py to check.

    python fault_caller.py CONFIG_JSON

A separate process so that the driver can interrupt or SIGKILL it. Every
outcome the API documents (a return value, DistributedRuntimeError,
KeyboardInterrupt) is recorded and the script exits 0; anything else
escapes as a traceback and a non-zero status, which the driver counts as a
crash of the caller.
"""

import json
import os
import sys
import time


def save(path, record):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f)
    os.replace(tmp, path)


def wait_for(path, limit=60.0):
    """Until the driver creates `path` (its moment to stop the job)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if os.path.exists(path):
            return True
        time.sleep(0.005)
    return False


def main():
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    from davincirunsdk import DistributedRuntimeError, start_distributed_train

    record = {"outcome": None}
    job = start_distributed_train(
        cfg["command"],
        work_dir=cfg["work_dir"],
        log_dir=cfg["log_dir"],
        output_notebook=cfg["output_notebook"],
        rank_table=cfg["rank_table"],
        grace_period=cfg["grace_period"],
        job_timeout=cfg["job_timeout"],
        wait_timeout=0,
        env=cfg["env"],
    )
    record.update(run_dir=job.run_dir, pids=job.pids)
    save(cfg["result"], record)
    try:
        if cfg["ending"] == "terminate":
            record["triggered"] = wait_for(cfg["trigger"])
            job.terminate()
        with open(cfg["waiting"], "w"):
            pass
        code = job.wait()
        record.update(outcome="returned", exit_code=code)
    except DistributedRuntimeError as e:
        record.update(outcome="runtime_error", exit_code=e.returncode, rank=getattr(e, "rank", None), message=str(e))
    except KeyboardInterrupt:
        if job.poll() is None:  # it came before wait() began: stop the job as wait() would have
            job.terminate()
            job.wait(raise_exception=False)
        record.update(outcome="keyboard_interrupt", exit_code=job.poll())
    record["report"] = job.result.failure_report()
    save(cfg["result"], record)


if __name__ == "__main__":
    main()
