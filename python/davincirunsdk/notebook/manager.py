"""``davincirunsdk.notebook.manager`` of davincirunsdk 0.1.x: the same
managers as ``davincirunsdk.manager``, none carried over (see there)."""

from ..manager import (
    AscendVersionManager,
    BatchLogManager,
    FMKManager,
    Manager,
    OpManager,
    SlogdManager,
    log,
)

__all__ = ["AscendVersionManager", "BatchLogManager", "FMKManager", "Manager", "OpManager", "SlogdManager", "log"]
