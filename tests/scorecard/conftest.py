"""The synthetic study builders (``synth``) of tests/study_tables.py for this package's tests."""

from tests.study_tables import synth  # noqa: F401 — a fixture, registered by being imported here
