"""``davincirunsdk.notebook.fmk`` of davincirunsdk 0.1.x: ``FMK``, not
carried over (see ``davincirunsdk.fmk``)."""

from ..fmk import FMK, log

__all__ = ["FMK", "log"]
