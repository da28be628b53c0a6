"""Celery tasks: thin adapters over the agent and services."""

from __future__ import annotations

from celery import shared_task

from workers import agent


@shared_task(name="workers.tasks.node_heartbeat", ignore_result=True)
def node_heartbeat() -> dict[str, object]:
    """Report the inventory of the node whose worker runs this task (NVML, or the host probe)."""
    node = agent.node_heartbeat()
    return {"node": node.name, "probe": node.probe, "device_count": node.device_count}
