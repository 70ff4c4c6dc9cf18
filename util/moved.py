"""Names a released handout imports keep working after they move: from their old place, with a warning.

A released handout is a promise: a student half-way through a lab does not download it again, so a
name their notebook imports must resolve for the rest of the term wherever the course moves it.
Each lab records what its handouts import and what has moved (``util/labs/labN/surface.py``: ``NAMES``
and ``MOVED``, old place -> new place); the registry collects them (:data:`util.labs.MOVED`), and
this module answers from it, naming no lab itself:

* an old **module** name (a ``util`` module a lab has since moved into its folder) is found by
  :class:`_Finder`, which sits last on ``sys.meta_path`` (so it is asked only about a ``util``
  module no file provides) and hands back the module now at the new place, the very same object;
* an old **attribute** of a module that still exists (a function a lab has since taken) is
  answered by that module's ``__getattr__ = util.moved.attributes(__name__)``: a core module that
  loses a name a handout imports gets that one line.

Either way a :class:`DeprecationWarning` names the new place, attributed to the student's own line
(so Jupyter shows it under the cell); the value is the object at the new place, so the notebook
computes exactly what the current handout does. ``tests/test_surface.py`` imports every recorded
name, old and new.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any, Callable

PREFIX = "util."
"""Only the course library's names are redirected."""


def _caller_level() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside the import machinery and
    this module: the student's ``import`` line. (``warnings`` itself passes over importlib's frames
    when it counts, so only the others are counted here.)"""
    frame, level = sys._getframe(1), 1
    while frame is not None and (frame.f_code.co_filename == __file__ or _internal(frame)):
        level += not _internal(frame)
        frame = frame.f_back
    return level


def _internal(frame) -> bool:  # noqa: ANN001 - a frame
    name = frame.f_code.co_filename
    return "importlib" in name and "_bootstrap" in name


def _warn(old: str, new: str) -> None:
    warnings.warn(f"{old} has moved to {new}; the old name keeps working for the rest of the term, "
                  f"but a new notebook should import {new}", DeprecationWarning, stacklevel=_caller_level())


def _moved() -> dict[str, str]:
    loading = sys.modules.get("util.labs")
    if loading is not None and not hasattr(loading, "MOVED"):
        return {}  # the registry itself is loading (it asks for a lab's optional parts)
    from util.labs import MOVED  # only when a name is missing: importing util stays light

    return MOVED


def _split(place: str) -> tuple[str, str]:
    module, _, name = place.partition(":")
    return module, name


class _Alias(importlib.abc.Loader):
    """Loads an old module name as the module now at its new place (the same object)."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec):  # noqa: ANN001 - importlib's signature
        return None

    def exec_module(self, module: ModuleType) -> None:
        _warn(module.__name__, self.new)
        sys.modules[module.__name__] = importlib.import_module(self.new)  # import returns this one


class _Finder(importlib.abc.MetaPathFinder):
    """Finds ``util`` modules that moved (``util.labs.MOVED``), after every other finder failed."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None):  # noqa: ANN201
        if not fullname.startswith(PREFIX):
            return None
        new = _moved().get(fullname)
        if new is None or ":" in new:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(new))


def attributes(module: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module``: an attribute it no longer has but a lab recorded as
    moved (``"module:name"`` in ``util.labs.MOVED``) comes from its new place, with a warning."""
    def __getattr__(name: str) -> Any:
        if not name.startswith("__"):  # importlib and inspect probe dunders: never the registry
            new = _moved().get(f"{module}:{name}")
            if new is not None:
                new_module, new_name = _split(new)
                _warn(f"{module}.{name}", f"{new_module}.{new_name or name}")
                return getattr(importlib.import_module(new_module), new_name or name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return __getattr__


def install() -> None:
    """Put the finder last on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.append(_Finder())
