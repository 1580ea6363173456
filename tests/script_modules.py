"""The repository's scripts as modules, so that tests use their helpers instead of copies."""

import importlib.util
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def load(name: str):
    """scripts/<name>.py, imported (it runs nothing at import: each script's work is under __main__)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
