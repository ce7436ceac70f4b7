"""Loading the scripts under examples/ as modules in the tests (examples/ is not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_example(path: Path, name: str) -> ModuleType:
    """The script at `path` as the module `name` (registered in sys.modules first: dataclasses
    look their module up while a class is made; unregistered again if the script fails)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
