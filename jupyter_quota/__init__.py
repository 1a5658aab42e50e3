"""jupyter_quota: quota-aware fine-tuning from the notebook.

The server extension (REST API under ``{base_url}quota/v1``), the JupyterLab extension (its
prebuilt assets under ``labextension/``), and the pure domain modules (``quantity``, ``quota``,
``profiles``, ``jobspec``) that both backends share.
"""

try:
    from ._version import __version__
except ImportError:  # pragma: no cover - a source tree that was never built
    import warnings

    warnings.warn("Importing 'jupyter_quota' outside a proper installation.", stacklevel=2)
    __version__ = "dev"


def _jupyter_labextension_paths():
    return [{"src": "labextension", "dest": "jupyter-quota"}]


def _jupyter_server_extension_points():
    return [{"module": "jupyter_quota"}]


def _load_jupyter_server_extension(server_app):
    """Wire config, team registry, backend and REST routes into a running ``ServerApp``."""
    from .extension import load

    load(server_app)
