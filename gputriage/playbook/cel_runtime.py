"""The CEL engine without its command-line tool: the compiled extension module alone.

The ``common-expression-language`` package's ``cel/__init__.py`` imports its ``cli`` module,
which pulls in typer, prompt_toolkit, rich.syntax and pygments: about 99% of ``import cel``
(0.1-0.35 s on the project's 2-core machine). gputriage only needs ``compile`` and
``Context``, which live in the compiled extension ``cel/cel.*.so``. :func:`cel_module` loads
that file directly, without running the package's ``__init__``, and registers it as
``cel.cel`` so a later ``import cel`` (tests, user code) reuses the same module instead of
initialising the extension twice (PyO3 refuses a second initialisation).

The layout this relies on is that of the pinned versions (``pyproject.toml``:
``common-expression-language>=0.10,<0.11``); ``tests/unit/test_cel_runtime.py`` fails when it
breaks. If the extension cannot be found, the ordinary ``import cel`` is used, so a new
layout costs speed, never correctness.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType

#: The name the extension module is registered under (its place inside the package).
EXTENSION = "cel.cel"

_lock = threading.Lock()


def cel_module() -> ModuleType:
    """The module with ``compile``, ``Context`` and ``Program``: loaded once per process."""
    loaded = sys.modules.get(EXTENSION)
    if loaded is not None:
        return loaded
    with _lock:
        loaded = sys.modules.get(EXTENSION)
        if loaded is not None:
            return loaded
        module = _load_extension()
        if module is None:  # an unexpected layout: the slow, complete import
            import cel

            return cel
        return module


def extension_path() -> Path | None:
    """Where the compiled extension is, without importing the ``cel`` package."""
    spec = importlib.util.find_spec("cel") if "cel" not in sys.modules else None
    locations = (
        spec.submodule_search_locations
        if spec is not None
        else getattr(sys.modules.get("cel"), "__path__", None)
    )
    for folder in locations or ():
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            candidate = Path(folder) / f"cel{suffix}"
            if candidate.is_file():
                return candidate
    return None


def _load_extension() -> ModuleType | None:
    path = extension_path()
    if path is None:
        return None
    loader = importlib.machinery.ExtensionFileLoader(EXTENSION, str(path))
    spec = importlib.util.spec_from_file_location(EXTENSION, path, loader=loader)
    if spec is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[EXTENSION] = module
    try:
        loader.exec_module(module)
    except BaseException:
        sys.modules.pop(EXTENSION, None)
        raise
    if not (hasattr(module, "compile") and hasattr(module, "Context")):
        sys.modules.pop(EXTENSION, None)
        return None
    return module
