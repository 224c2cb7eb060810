"""The training tests' tiny models serve the teacher's tests too (tests/train/conftest.py)."""

from tests.train.conftest import models_f64

__all__ = ["models_f64"]
