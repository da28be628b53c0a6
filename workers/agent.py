"""The node agent: who this node is, and its heartbeat (probe the machine, record it)."""

from __future__ import annotations

import socket

from django.conf import settings

from catalog.models import Node
from workers.probes.inventory import probe_inventory
from workers.services import node_heartbeat_record


def node_name() -> str:
    """``VRAMPLAN_NODE_NAME`` when set, else the host name (in containers, set the name explicitly)."""
    return settings.VRAMPLAN_NODE_NAME or socket.gethostname()


def node_heartbeat() -> Node:
    """Probe this machine and record it as the node :func:`node_name` names."""
    return node_heartbeat_record(node_name(), probe_inventory())
