"""The local backend's fixture for the e2e tests that drive it directly (``local_testing.make_backend``)."""

from local_testing import make_backend  # noqa: F401 (a fixture)
