"""The ``railbed`` command (``cli/main.py``), above every layer of the project: it imports any of
them and none imports it (tests/test_layering.py). ``python -m cli`` runs it like the ``railbed``
console script."""

from cli.main import main, version

__all__ = ["main", "version"]
