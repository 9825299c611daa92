"""caseledger write side: everything that produces evidence."""

__version__ = "0.1.0"
