"""caseledger write side: everything that produces evidence.

``__version__`` is the one app version: pyproject.toml's ``[project] version``
as installed (package metadata). Every event that records an app version
(RunStarted, the calibration record) and every adapter client string reads it.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__: str = version("caseledger")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
