"""Every built-in action and plugin, registered in one explicit call."""
from __future__ import annotations

from actions.allocate import AllocateAction
from actions.autoscale import AutoscaleAction
from actions.backfill import BackfillAction
from actions.consolidation import ConsolidationAction
from actions.enqueue import EnqueueAction
from actions.preempt import PreemptAction
from actions.reclaim import ReclaimAction
from actions.stalegangeviction import StaleGangEvictionAction
from kaisched.framework.registry import Registry
from plugins.dra import DraPlugin
from plugins.gang import GangPlugin
from plugins.gpusharing import GpuSharingPlugin
from plugins.hostports import HostPortsPlugin
from plugins.minruntime import MinRuntimePlugin
from plugins.nodeaffinity import NodeAffinityPlugin
from plugins.nodeorder import NodeOrderPlugin
from plugins.podaffinity import PodAffinityPlugin
from plugins.podgroupstatus import PodGroupStatusPlugin
from plugins.predicates import PredicatesPlugin
from plugins.priority import PriorityPlugin
from plugins.proportion import ProportionPlugin
from plugins.topologyspread import TopologySpreadPlugin
from plugins.volumebinding import VolumeBindingPlugin


def register_builtins(registry: Registry | None = None) -> Registry:
    registry = registry or Registry()
    registry.add_action("enqueue", EnqueueAction)
    registry.add_action("allocate", AllocateAction)
    registry.add_action("backfill", BackfillAction)
    registry.add_action("consolidation", ConsolidationAction)
    registry.add_action("reclaim", ReclaimAction)
    registry.add_action("preempt", PreemptAction)
    registry.add_action("stalegangeviction", StaleGangEvictionAction)
    registry.add_action("autoscale", AutoscaleAction)
    registry.add_plugin("priority", PriorityPlugin)
    registry.add_plugin("gang", GangPlugin)
    registry.add_plugin("podgroupstatus", PodGroupStatusPlugin)
    registry.add_plugin("proportion", ProportionPlugin)
    registry.add_plugin("predicates", PredicatesPlugin)
    registry.add_plugin("nodeorder", NodeOrderPlugin)
    registry.add_plugin("podaffinity", PodAffinityPlugin)
    registry.add_plugin("topologyspread", TopologySpreadPlugin)
    registry.add_plugin("hostports", HostPortsPlugin)
    registry.add_plugin("nodeaffinity", NodeAffinityPlugin)
    registry.add_plugin("volumebinding", VolumeBindingPlugin)
    registry.add_plugin("dra", DraPlugin)
    registry.add_plugin("gpusharing", GpuSharingPlugin)
    registry.add_plugin("minruntime", MinRuntimePlugin)
    return registry
