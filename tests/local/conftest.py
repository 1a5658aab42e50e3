"""The local backend's fixture for every test here (``local_testing.make_backend``)."""

from local_testing import make_backend  # noqa: F401 (a fixture)
