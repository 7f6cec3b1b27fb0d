"""``davincirunsdk.notebook.cli`` of davincirunsdk 0.1.x, which defined
nothing; kept so that importing it works. The command line is the
``davincirun`` program (``python -m davincirunsdk.davincirun``)."""

__all__: list = []
