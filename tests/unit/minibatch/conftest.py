"""Fixtures of the minibatch path's tests: the dataset tests' 1,500-node demo graph."""

from tests.unit.dataset.conftest import demo_1500  # noqa: F401 - a fixture, found by name
