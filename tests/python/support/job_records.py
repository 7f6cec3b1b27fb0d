"""Job records (job.json, format davincirun-job/1) for the report's tests.

The examples in tests/data/job_records/ are hand-written and small; a record
of many ranks is made here instead, shaped as a job of `/bin/true` ranks
records it: each rank started about 1 ms after the one before, exited 0 at
once with no output, one exit event each. Optional: one failing rank, a
slow one, several servers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "job_records"
START = 1796500000.0


def example(name: str) -> Dict[str, Any]:
    return json.loads((EXAMPLES / name).read_text(encoding="utf-8"))


def many_ranks_record(ranks: int, servers: int = 1, failing: Optional[int] = None,
                      job_id: str = "job-0a1b2c3d") -> Dict[str, Any]:
    per_server = -(-ranks // servers)
    server_ids = ["10.1.0.{}".format(i + 1) for i in range(servers)]
    run_dir = "/cache/davincirun/log/20261201-000000-" + job_id
    end = START + ranks * 0.001 + 0.05
    procs: List[Dict[str, Any]] = []
    events: List[Dict[str, Any]] = [{"time": START, "server_id": s, "kind": "state", "role": None, "rank": None,
                                     "text": "starting -> running on ranks_started"} for s in server_ids]
    for rank in range(ranks):
        started = START + rank * 0.001
        ended = started + 0.004
        fails = rank == failing
        server = server_ids[rank // per_server]
        procs.append({
            "role": "rank", "rank": rank, "local_rank": rank % per_server, "server_id": server,
            "physical_device_id": rank % per_server, "logical_device_id": rank % per_server, "pid": 20000 + rank,
            "log": "{}/rank_{}.device_{}.log".format(run_dir, rank, rank % per_server),
            "started": started, "ended": ended, "exit_code": 1 if fails else 0, "signal": None,
            "status": "exit code 1" if fails else "exit code 0", "ended_how": "failed" if fails else "exited",
            "output_bytes": 12 if fails else 0,
            "activity": {"start": START, "step_s": 0.25, "bytes": [12 if fails else 0]},
            "progress": [], "slow": [], "metrics": {}})
        events.append({"time": ended, "server_id": server, "kind": "exit", "role": "rank", "rank": rank,
                       "text": "rank {} exited with {}".format(rank, procs[-1]["status"])})
    failure = None
    if failing is not None:
        failed = procs[failing]
        failure = {"role": "rank", "rank": failing, "server_id": failed["server_id"], "time": failed["ended"],
                   "status": failed["status"]}
    return {
        "format": "davincirun-job/1", "job_id": job_id, "command": ["/bin/true"], "world_size": ranks,
        "clock": {"reference_server": server_ids[0], "method": "one server: its own clock", "max_error_s": 0.0},
        "started": START, "ended": end, "success": failing is None, "exit_code": 0 if failing is None else 1,
        "stop_reason": "none" if failing is None else "rank_failed",
        "stop_detail": None if failing is None else "rank {} failed with exit code 1".format(failing),
        "first_failure": failure,
        "root_cause": None if failure is None else {
            "role": "rank", "rank": failing, "server_id": failure["server_id"], "exception": "",
            "log": procs[failing]["log"], "lines": ["it failed"], "highlight": [0]},
        "servers": [{"server_id": s, "run_dir": run_dir, "ranks": sum(p["server_id"] == s for p in procs),
                     "clock_offset_s": 0.0, "success": failing is None, "stop_reason": "none"} for s in server_ids],
        "attempts": [{"attempt": 1, "started": START, "ended": end, "stop_reason": "none", "stop_detail": None,
                      "first_failure": failing, "root_cause": "", "restarted": False, "decision": ""}],
        "ranks": procs, "events": sorted(events, key=lambda e: e["time"]),
    }


def write_run(run_dir: Path, record: Dict[str, Any]) -> Path:
    """A run directory holding `record` as its job.json, as a job leaves it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "job.json").write_text(json.dumps(record, indent=1, ensure_ascii=False), encoding="utf-8")
    return run_dir
