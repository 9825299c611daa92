"""Fixtures of the pi adapter tests (defined in pikit.py): the real pi and a fake model."""

from pikit import fake_model, pi_path

__all__ = ["fake_model", "pi_path"]
