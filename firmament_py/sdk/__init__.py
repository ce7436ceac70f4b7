"""The policy SDK: everything a scheduling policy's author imports.

A policy is a pluggy plugin whose `hookimpl`-marked functions answer the hooks in `hookspecs`
(the API, with its rules); the built-in defaults answer every hook it leaves out. It receives
read-only views of the cluster (`TaskView`, `MachineView`, `ResourceView`, `ClusterView`) and
returns immutable values (`ArcDescriptor`, `ResourceRef`, `ResourceStats`, class ids). A minimal
load-spreading policy::

    from firmament_py.sdk import ArcDescriptor, ResourceView, hookimpl

    class LoadSpreading:
        @hookimpl
        def equiv_class_to_resource(self, resource: ResourceView) -> ArcDescriptor:
            stats = resource.stats
            return ArcDescriptor(stats.running_tasks, capacity=stats.free_slots)

Installed policies are found through the entry-point group `firmament_py.policies` and selected
by name with `load_policy`; `PolicyManager(policy, name=...)` selects one directly (in tests).
"""

from __future__ import annotations

from firmament_py.model.ids import EquivClassId, JobId, MachineId, PodId, RackId, TaskId, Time
from firmament_py.model.labels import Labels, LabelSelector
from firmament_py.model.resources import NO_RESOURCES, Resources
from firmament_py.model.states import TaskState
from firmament_py.sdk.answers import (
    ArcColumns,
    ClassArcs,
    ResourceArcs,
    TaskArcs,
    TimedArcs,
    TopologyArcs,
)
from firmament_py.sdk.columns import (
    Clock,
    JobBatch,
    ResourceColumns,
    StatsColumns,
    TaskBatch,
    Topology,
    timed_cost,
)
from firmament_py.sdk.defaults import (
    AGGREGATOR_COST,
    CLUSTER_AGGREGATOR,
    UNSCHEDULED_COST,
    FirmamentDefaults,
    schedulable_slots,
    selector_class,
    selectors_of_class,
)
from firmament_py.sdk.discovery import available_policies, load_policy, unknown_policy
from firmament_py.sdk.dispatch import DEFAULTS_PLUGIN_NAME
from firmament_py.sdk.errors import POLICY_ENTRY_POINT_GROUP, PolicyError, UnknownPolicyError
from firmament_py.sdk.hookspecs import (
    ALL_HOOKS,
    ANSWER_HOOKS,
    BATCH_HOOKS,
    NOTIFICATION_HOOKS,
    hookimpl,
)
from firmament_py.sdk.manager import PolicyManager
from firmament_py.sdk.types import (
    MAX_CAPACITY,
    MAX_COST,
    ArcDescriptor,
    ClusterView,
    JobView,
    MachineView,
    ResourceKind,
    ResourceRef,
    ResourceStats,
    ResourceView,
    TaskView,
)

__all__ = [
    "AGGREGATOR_COST",
    "ALL_HOOKS",
    "ANSWER_HOOKS",
    "BATCH_HOOKS",
    "CLUSTER_AGGREGATOR",
    "DEFAULTS_PLUGIN_NAME",
    "MAX_CAPACITY",
    "MAX_COST",
    "NOTIFICATION_HOOKS",
    "NO_RESOURCES",
    "POLICY_ENTRY_POINT_GROUP",
    "UNSCHEDULED_COST",
    "ArcColumns",
    "ArcDescriptor",
    "ClassArcs",
    "Clock",
    "ClusterView",
    "EquivClassId",
    "FirmamentDefaults",
    "JobBatch",
    "JobId",
    "JobView",
    "LabelSelector",
    "Labels",
    "MachineId",
    "MachineView",
    "PodId",
    "PolicyError",
    "PolicyManager",
    "RackId",
    "ResourceArcs",
    "ResourceColumns",
    "ResourceKind",
    "ResourceRef",
    "ResourceStats",
    "ResourceView",
    "Resources",
    "StatsColumns",
    "TaskArcs",
    "TaskBatch",
    "TaskId",
    "TaskState",
    "TaskView",
    "Time",
    "TimedArcs",
    "Topology",
    "TopologyArcs",
    "UnknownPolicyError",
    "available_policies",
    "hookimpl",
    "load_policy",
    "schedulable_slots",
    "selector_class",
    "selectors_of_class",
    "timed_cost",
    "unknown_policy",
]
