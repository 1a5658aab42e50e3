"""Backends: where jobs run and where usage is counted. ``make_backend`` picks one from config."""

from __future__ import annotations

from ..errors import InvalidRequest


def make_backend(config, log=None, root_dir: str = ""):
    if config.backend == "local":
        from ..stall import StallPolicy
        from .local import LocalBackend
        from .local.inventory import detect_inventory

        return LocalBackend(
            ledger_path=config.ledger_path,
            state_dir=config.state_dir,
            inventory=detect_inventory(config.inventory or None),
            grace_period=config.cancel_grace_period,
            poll_interval=config.reap_interval,
            workdir=config.job_workdir or None,
            job_user=config.job_user,
            server_dir=root_dir or None,
            log_max_bytes=config.job_log_max_bytes,
            log_backups=config.job_log_backups,
            cgroups=config.job_cgroups,
            retention_seconds=config.job_retention_seconds,
            retention_count=config.job_retention_count,
            job_image=config.job_image,
            stall_policy=StallPolicy(config.stalled_job_minutes, config.stalled_gpu_utilization),
            log=log,
        )
    if config.backend == "kube":
        from .kube import KubeBackend

        return KubeBackend.from_config(config, log=log)
    raise InvalidRequest(f"JupyterQuota.backend = {config.backend!r} is not available; use 'local' or 'kube'")
