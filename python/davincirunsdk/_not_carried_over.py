"""Stand-ins for names of davincirunsdk 0.1.x that have no meaning any more
(its ModelArts training-job chores, its process managers, its log tools):
importing them works, so that 0.1.x code loads; using one raises
:class:`~davincirunsdk.errors.NotCarriedOverError` naming what replaces it."""

from __future__ import annotations

from typing import Any, Callable, NoReturn

from .errors import NotCarriedOverError


def refuse(name: str, replacement: str) -> NoReturn:
    """Raises NotCarriedOverError for the 0.1.x name `name`."""
    error = NotCarriedOverError(
        "%s (davincirunsdk 0.1.x) is not carried over to this version: %s" % (name, replacement)
    )
    error.name = name
    error.replacement = replacement
    raise error


class _StandInType(type):
    """The metaclass of a stand-in class: calling the class (making an
    instance) or reading any attribute it does not define raises. Special
    names (``__wrapped__``, ``__signature__``...) stay ordinary missing
    attributes, so that introspection (``hasattr``, ``inspect``, pytest)
    keeps working on the module that holds it."""

    _name: str
    _replacement: str

    def __call__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        refuse(cls._name, cls._replacement)

    def __getattr__(cls, attribute: str) -> NoReturn:
        if attribute.startswith("__") and attribute.endswith("__"):
            raise AttributeError(attribute)
        refuse("%s.%s" % (cls._name, attribute), cls._replacement)


def stand_in_class(name: str, replacement: str) -> type:
    """A class named like 0.1.x's `name` (``"module.Class"``) whose every use
    raises NotCarriedOverError naming `replacement`."""
    return _StandInType(name.rsplit(".", 1)[-1], (), {"_name": name, "_replacement": replacement,
                                                       "__doc__": "Not carried over: " + replacement})


def stand_in_function(name: str, replacement: str) -> Callable[..., NoReturn]:
    """A function named like 0.1.x's `name` whose call raises NotCarriedOverError."""

    def stand_in(*args: Any, **kwargs: Any) -> NoReturn:
        refuse(name, replacement)

    stand_in.__name__ = stand_in.__qualname__ = name.rsplit(".", 1)[-1]
    stand_in.__doc__ = "Not carried over: " + replacement
    return stand_in
