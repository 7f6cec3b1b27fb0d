"""One rank's process, as davincirunsdk 0.1.x's ``fmk_processes`` listed them."""

from typing import Any, Optional


class RankProcess:
    """One rank of a job on this machine, an entry of
    :attr:`DistributedJob.fmk_processes`.

    In davincirunsdk 0.1.x these entries were ``subprocess.Popen`` objects of
    the calling process. Now the ranks are children of the job's supervisor
    process, so this record offers what can still be known from here; to
    stop ranks, use the job's ``terminate()`` / ``destroy()``, which stop
    every process they started too.

    Attributes:
        rank (int): the global rank (``RANK_ID``).
        device_id (int): the physical device id (N of ``/dev/davinciN``).
        pid (int): the process id.
    """

    def __init__(self, job: Any, index: int) -> None:
        self._job = job
        self._index = index
        assignment = job.plan.ranks[index]
        self.rank: int = assignment.rank
        self.device_id: int = assignment.physical_device_id

    @property
    def pid(self) -> int:
        """The rank's process id: in a job that restarts, the attempt running's."""
        return int(self._job.pids[self._index])

    @property
    def returncode(self) -> Optional[int]:
        """``None`` until the whole job is over (the ranks' exits reach this
        process with the job's result); then, as ``subprocess.Popen`` has it,
        the rank's exit code, or ``-N`` when signal N killed it. (The job's
        ``result.ranks`` give the shell's form, 128 + N.)"""
        result = self._job.result
        if result is None:
            return None
        rank = result.ranks[self._index]
        return -rank.signal if rank.signal is not None else rank.exit_code

    def poll(self) -> Optional[int]:
        """:attr:`returncode`, as ``subprocess.Popen.poll()``: ``None`` while the job runs."""
        return self.returncode

    def __repr__(self) -> str:
        return "<RankProcess rank %d, device %d, pid %d, returncode %r>" % (
            self.rank, self.device_id, self.pid, self.returncode)
