"""``davincirunsdk.notebook.exception``, the 0.1.x location of DistributedRuntimeError."""

from ..errors import DistributedRuntimeError

__all__ = ["DistributedRuntimeError"]
