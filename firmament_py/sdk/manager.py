"""`PolicyManager`: one selected policy on top of the built-in defaults, asked through typed,
checked methods.

pluggy's hook calls take keyword arguments and return whatever a plugin returned. The scheduler
must not trust that: the flow graph's compiled solvers assume valid values, and a policy is
third-party code. So the scheduler never calls pluggy directly; it calls `PolicyManager`, which
has one typed method per hook (the batch hooks' are in `sdk/batch_questions.py`), checks every
answer (`sdk/checks.py`), and turns every failure (a bad answer or an exception inside a hook)
into one `PolicyError` that names the policy, the hook call and the offending value, for the
scheduler to isolate and report.

Registering the policy, and how each hook is called, is `sdk/dispatch.py`; finding installed
policies by name is `sdk/discovery.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

import pluggy

from firmament_py.model.cluster import ClusterState
from firmament_py.model.ids import EquivClassId, MachineId, TaskId
from firmament_py.sdk import hookspecs
from firmament_py.sdk.batch_questions import BatchQuestions
from firmament_py.sdk.checks import equiv_class_problem, is_sequence
from firmament_py.sdk.columns import Topology, TopologyStats, columns_of_stats, sum_by_parent
from firmament_py.sdk.defaults import FirmamentDefaults
from firmament_py.sdk.dispatch import DEFAULTS_PLUGIN_NAME, Caller, policy_caller, register_policy
from firmament_py.sdk.errors import POLICY_ENTRY_POINT_GROUP, PolicyError
from firmament_py.sdk.types import (
    ArcDescriptor,
    ClusterView,
    JobView,
    MachineView,
    ResourceKind,
    ResourceRef,
    ResourceStats,
    ResourceView,
    TaskView,
    arc_descriptor_problem,
)

__all__ = ["DEFAULTS_PLUGIN_NAME", "POLICY_ENTRY_POINT_GROUP", "PolicyError", "PolicyManager"]


def _describe_call(hook: str, arguments: Mapping[str, object]) -> str:
    shown = ", ".join(f"{key}={value!r}" for key, value in arguments.items() if key != "cluster")
    return f"{hook}({shown})"


class PolicyManager(BatchQuestions):
    """One selected policy on top of the built-in defaults, asked through typed methods.

    Each method has the name and keyword arguments of its hook (see `hookspecs`) and returns a
    checked answer or raises `PolicyError`. `preemption_enabled` is asked once, here.
    """

    def __init__(self, policy: object, *, name: str) -> None:
        """Register `policy` (a module or an instance) under `name`, then the defaults.

        Raises PolicyError if the name is reserved, the policy is a class rather than an
        instance, implements a hook that does not exist, or in a way that would never be
        called (`sdk/dispatch.py` lists how), or gives a wrong answer to `preemption_enabled`.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"a policy name must be a non-empty str, got {name!r}")
        self.name = name
        if name == DEFAULTS_PLUGIN_NAME:
            raise PolicyError(name, "this name is reserved for the built-in defaults")
        defaults = FirmamentDefaults()
        manager = register_policy(policy, name, defaults)
        self._plugin_manager = manager
        self._policy = policy
        self._policy_hooks = frozenset(
            caller.name for caller in manager.get_hookcallers(policy) or ()
        )
        self._callers: dict[str, Caller] = {
            hook: policy_caller(
                hook,
                getattr(manager.hook, hook) if hook in self._policy_hooks else None,
                defaults,
            )
            for hook in hookspecs.ALL_HOOKS
        }
        answer = self._ask("preemption_enabled", {})
        if type(answer) is not bool:
            raise self._wrong("preemption_enabled", {}, answer, "expected a bool")
        self.preemption_enabled: bool = answer

    def per_item(self, batch_hook: str) -> bool:
        """Whether the scheduler asks the per-item hooks `batch_hook` stands for
        (`hookspecs.BATCH_HOOKS`) rather than `batch_hook`: when the policy implements some of
        them and not the batch form, which keeps a policy written for the per-item hooks
        asked exactly as before."""
        return batch_hook not in self._policy_hooks and not self._policy_hooks.isdisjoint(
            hookspecs.BATCH_HOOKS[batch_hook]
        )

    def __repr__(self) -> str:
        return f"PolicyManager({self.name!r})"

    @property
    def plugin_manager(self) -> pluggy.PluginManager:
        """The underlying pluggy manager (for inspection; call hooks through this class).
        The calls are fixed when the manager is made: plugins registered here later, and
        pluggy's call monitoring, do not see the hooks that are asked directly."""
        return self._plugin_manager

    def cluster_view(
        self, state: ClusterState, stats: Mapping[ResourceRef, ResourceStats] | None = None
    ) -> ClusterView:
        """The view of `state` this policy's hooks receive: built with the policy's answer to
        `preemption_enabled`, serving `stats` (a mapping the caller may keep updating, as with
        the results of `statistics_pass`)."""
        return ClusterView(state, preemption_enabled=self.preemption_enabled, stats=stats)

    @property
    def implemented_hooks(self) -> frozenset[str]:
        """The hooks the policy itself implements; the defaults answer the others."""
        return self._policy_hooks

    # ------------------------------------------------------------------ asking and checking

    def _ask(self, hook: str, arguments: dict[str, object]) -> object:
        try:
            return self._callers[hook](arguments)
        except Exception as exc:
            raise PolicyError(
                self.name,
                f"{_describe_call(hook, arguments)} raised {type(exc).__name__}: {exc}"
                f"{self._attribution(hook)}",
                hook=hook,
            ) from exc

    def _attribution(self, hook: str) -> str:
        if hook in self._policy_hooks:
            return ""
        return " (answered by the built-in defaults; the policy does not implement this hook)"

    def _wrong(
        self, hook: str, arguments: Mapping[str, object], value: object, why: str
    ) -> PolicyError:
        return PolicyError(
            self.name,
            f"{_describe_call(hook, arguments)} returned {value!r}: {why}{self._attribution(hook)}",
            hook=hook,
        )

    def _arc(self, hook: str, arguments: dict[str, object]) -> ArcDescriptor:
        # `_ask`, inlined: descriptors are most of a round's 10^4 hook calls.
        try:
            value = self._callers[hook](arguments)
        except Exception as exc:
            raise PolicyError(
                self.name,
                f"{_describe_call(hook, arguments)} raised {type(exc).__name__}: {exc}"
                f"{self._attribution(hook)}",
                hook=hook,
            ) from exc
        problem = arc_descriptor_problem(value)
        if problem is not None:
            raise self._wrong(hook, arguments, value, problem)
        descriptor = cast(ArcDescriptor, value)
        if hook in hookspecs.TASK_ARC_HOOKS and descriptor.min_flow > 1:
            raise self._wrong(
                hook,
                arguments,
                value,
                f"min_flow {descriptor.min_flow} exceeds the one unit a task carries",
            )
        return descriptor

    def _sequence(self, hook: str, arguments: dict[str, object]) -> tuple[object, ...]:
        value = self._ask(hook, arguments)
        if not is_sequence(value):
            raise self._wrong(hook, arguments, value, "expected a list or tuple")
        items = tuple(cast(Sequence[object], value))
        try:
            if len(set(items)) == len(items):  # the usual case, checked in C
                return items
        except TypeError:  # unhashable: the loop below skips it, the type checks name it
            pass
        seen: set[object] = set()
        for position, item in enumerate(items):
            try:
                duplicate = item in seen
            except TypeError:  # unhashable: the type checks below name it
                continue
            if duplicate:
                raise self._wrong(
                    hook, arguments, value, f"item {position}, {item!r}, is a duplicate"
                )
            seen.add(item)
        return items

    def _resources(
        self, hook: str, arguments: dict[str, object], cluster: ClusterView
    ) -> tuple[ResourceRef, ...]:
        items = self._sequence(hook, arguments)
        has_resource = cluster.has_resource
        for item in items:  # the usual case: all fine (a class may name 10^3 machines)
            if type(item) is not ResourceRef or not has_resource(item):
                break
        else:
            return cast(tuple[ResourceRef, ...], items)
        for position, item in enumerate(items):
            if not isinstance(item, ResourceRef):
                raise self._wrong(
                    hook, arguments, items, f"item {position}, {item!r}, is not a ResourceRef"
                )
            if not has_resource(item):
                raise self._wrong(
                    hook, arguments, items, f"item {position}, {item!r}, is not a live resource"
                )
        return cast(tuple[ResourceRef, ...], items)

    def _equiv_classes(
        self, hook: str, arguments: dict[str, object], *, source: EquivClassId | None = None
    ) -> tuple[EquivClassId, ...]:
        items = self._sequence(hook, arguments)
        for position, item in enumerate(items):
            problem = equiv_class_problem(item)
            if problem is not None:
                raise self._wrong(hook, arguments, items, f"item {position}, {item!r}, {problem}")
            if source is not None and item == source:
                raise self._wrong(
                    hook, arguments, items, f"item {position} is the class itself (a self-loop)"
                )
        return cast(tuple[EquivClassId, ...], items)

    def _stats(self, hook: str, arguments: dict[str, object]) -> ResourceStats:
        value = self._ask(hook, arguments)
        if not isinstance(value, ResourceStats):
            raise self._wrong(
                hook, arguments, value, f"expected ResourceStats, got {type(value).__name__}"
            )
        return value

    def _notify(self, hook: str, arguments: dict[str, object]) -> None:
        answers = self._ask(hook, arguments)
        if answers:  # pluggy collects the answers that are not None
            raise self._wrong(hook, arguments, answers, "notifications return nothing")

    # ------------------------------------------------------------------ shape

    def task_equiv_classes(
        self, *, task: TaskView, cluster: ClusterView
    ) -> tuple[EquivClassId, ...]:
        return self._equiv_classes("task_equiv_classes", {"task": task, "cluster": cluster})

    def task_preference_arcs(
        self, *, task: TaskView, cluster: ClusterView
    ) -> tuple[ResourceRef, ...]:
        arguments: dict[str, object] = {"task": task, "cluster": cluster}
        return self._resources("task_preference_arcs", arguments, cluster)

    def equiv_class_preference_arcs(
        self, *, equiv_class: EquivClassId, cluster: ClusterView
    ) -> tuple[ResourceRef, ...]:
        arguments: dict[str, object] = {"equiv_class": equiv_class, "cluster": cluster}
        return self._resources("equiv_class_preference_arcs", arguments, cluster)

    def equiv_class_to_equiv_class_arcs(
        self, *, equiv_class: EquivClassId, cluster: ClusterView
    ) -> tuple[EquivClassId, ...]:
        return self._equiv_classes(
            "equiv_class_to_equiv_class_arcs",
            {"equiv_class": equiv_class, "cluster": cluster},
            source=equiv_class,
        )

    # ------------------------------------------------------------------ arc descriptors

    def task_to_unscheduled(self, *, task: TaskView, cluster: ClusterView) -> ArcDescriptor:
        return self._arc("task_to_unscheduled", {"task": task, "cluster": cluster})

    def unscheduled_to_sink(
        self, *, job: JobView, incoming_tasks: int, cluster: ClusterView
    ) -> ArcDescriptor:
        arguments: dict[str, object] = {
            "job": job,
            "incoming_tasks": incoming_tasks,
            "cluster": cluster,
        }
        descriptor = self._arc("unscheduled_to_sink", arguments)
        if descriptor.capacity < incoming_tasks:
            raise self._wrong(
                "unscheduled_to_sink",
                arguments,
                descriptor,
                f"capacity {descriptor.capacity} is below the {incoming_tasks} tasks that may "
                "wait here, which could make the flow problem infeasible",
            )
        return descriptor

    def task_to_resource(
        self, *, task: TaskView, resource: ResourceView, cluster: ClusterView
    ) -> ArcDescriptor:
        arguments: dict[str, object] = {"task": task, "resource": resource, "cluster": cluster}
        return self._arc("task_to_resource", arguments)

    def resource_to_resource(
        self, *, parent: ResourceView, child: ResourceView, cluster: ClusterView
    ) -> ArcDescriptor:
        arguments: dict[str, object] = {"parent": parent, "child": child, "cluster": cluster}
        return self._arc("resource_to_resource", arguments)

    def leaf_to_sink(self, *, machine: MachineView, cluster: ClusterView) -> ArcDescriptor:
        arguments: dict[str, object] = {"machine": machine, "cluster": cluster}
        descriptor = self._arc("leaf_to_sink", arguments)
        running = len(machine.running_task_ids)
        if not cluster.preemption_enabled and descriptor.capacity < running:
            raise self._wrong(
                "leaf_to_sink",
                arguments,
                descriptor,
                f"capacity {descriptor.capacity} is below the {running} tasks pinned to the "
                "machine (preemption is disabled), which makes the flow problem infeasible",
            )
        return descriptor

    def task_to_equiv_class(
        self, *, task: TaskView, equiv_class: EquivClassId, cluster: ClusterView
    ) -> ArcDescriptor:
        arguments: dict[str, object] = {
            "task": task,
            "equiv_class": equiv_class,
            "cluster": cluster,
        }
        return self._arc("task_to_equiv_class", arguments)

    def equiv_class_to_resource(
        self, *, equiv_class: EquivClassId, resource: ResourceView, cluster: ClusterView
    ) -> ArcDescriptor:
        arguments: dict[str, object] = {
            "equiv_class": equiv_class,
            "resource": resource,
            "cluster": cluster,
        }
        return self._arc("equiv_class_to_resource", arguments)

    def equiv_class_to_equiv_class(
        self, *, source: EquivClassId, target: EquivClassId, cluster: ClusterView
    ) -> ArcDescriptor:
        arguments: dict[str, object] = {"source": source, "target": target, "cluster": cluster}
        return self._arc("equiv_class_to_equiv_class", arguments)

    def task_continuation(
        self, *, task: TaskView, machine: MachineView, cluster: ClusterView
    ) -> ArcDescriptor:
        arguments: dict[str, object] = {"task": task, "machine": machine, "cluster": cluster}
        return self._arc("task_continuation", arguments)

    def task_preemption(self, *, task: TaskView, cluster: ClusterView) -> ArcDescriptor:
        return self._arc("task_preemption", {"task": task, "cluster": cluster})

    # ------------------------------------------------------------------ statistics

    def prepare_stats(self, *, resource: ResourceView, cluster: ClusterView) -> ResourceStats:
        return self._stats("prepare_stats", {"resource": resource, "cluster": cluster})

    def gather_stats(
        self,
        *,
        parent: ResourceView,
        accumulated: ResourceStats,
        child: ResourceView,
        child_stats: ResourceStats,
        cluster: ClusterView,
    ) -> ResourceStats:
        arguments: dict[str, object] = {
            "parent": parent,
            "accumulated": accumulated,
            "child": child,
            "child_stats": child_stats,
            "cluster": cluster,
        }
        return self._stats("gather_stats", arguments)

    def update_stats(
        self, *, resource: ResourceView, stats: ResourceStats, cluster: ClusterView
    ) -> ResourceStats:
        arguments: dict[str, object] = {"resource": resource, "stats": stats, "cluster": cluster}
        return self._stats("update_stats", arguments)

    def statistics_pass(self, cluster: ClusterView) -> dict[ResourceRef, ResourceStats]:
        """Run the statistics pass over the whole resource topology and return every live
        resource's final statistics: machines, then racks, then pods, each prepared, gathered
        from its children in the order they joined, and updated.

        The topology is the cluster model's pod / rack / machine tree, so the pass needs no
        graph; the scheduler installs the result as the statistics its `ClusterView` serves.
        """
        final: dict[ResourceRef, ResourceStats] = {}
        levels = (
            [machine.ref for machine in cluster.machines.values()],
            [ResourceRef(ResourceKind.RACK, rack_id) for rack_id in cluster.racks],
            [ResourceRef(ResourceKind.POD, pod_id) for pod_id in cluster.pods],
        )
        for level in levels:
            for ref in level:
                resource = ResourceView(ref, cluster)
                accumulated = self.prepare_stats(resource=resource, cluster=cluster)
                for child_ref in resource.children:
                    accumulated = self.gather_stats(
                        parent=resource,
                        accumulated=accumulated,
                        child=ResourceView(child_ref, cluster),
                        child_stats=final[child_ref],
                        cluster=cluster,
                    )
                final[ref] = self.update_stats(
                    resource=resource, stats=accumulated, cluster=cluster
                )
        return final

    def round_statistics(
        self, *, topology: Topology, cluster: ClusterView
    ) -> Mapping[ResourceRef, ResourceStats]:
        """Give every level of `topology` the round's statistics, and return them by resource
        (what `ClusterView.stats` serves): the batch form (`machine_stats_batch`, summed up
        the levels) or, for a policy with statistics hooks of its own, `statistics_pass`.
        PolicyError if the policy fails or a sum leaves the int64 range."""
        if self.per_item("machine_stats_batch"):
            final = self.statistics_pass(cluster)
            for level in (topology.machines, topology.racks, topology.pods):
                level.stats = columns_of_stats([final[ref] for ref in level.refs])
            return final
        machines, racks, pods = topology.machines, topology.racks, topology.pods
        if len(machines):
            stats = self.machine_stats_batch(machines=machines, cluster=cluster)
            if stats is not machines.model:
                try:
                    racks_stats = sum_by_parent(machines.parents, len(racks), stats, racks.ids)
                    pods_stats = sum_by_parent(racks.parents, len(pods), racks_stats, pods.ids)
                except OverflowError as error:
                    raise PolicyError(self.name, str(error), hook="machine_stats_batch") from None
                machines.stats, racks.stats, pods.stats = stats, racks_stats, pods_stats
        return TopologyStats(topology)

    # ------------------------------------------------------------------ notifications

    def round_started(self, *, cluster: ClusterView) -> None:
        self._notify("round_started", {"cluster": cluster})

    def machine_added(self, *, machine: MachineView, cluster: ClusterView) -> None:
        self._notify("machine_added", {"machine": machine, "cluster": cluster})

    def machine_removed(self, *, machine_id: MachineId, cluster: ClusterView) -> None:
        self._notify("machine_removed", {"machine_id": machine_id, "cluster": cluster})

    def task_added(self, *, task: TaskView, cluster: ClusterView) -> None:
        self._notify("task_added", {"task": task, "cluster": cluster})

    def task_removed(self, *, task_id: TaskId, cluster: ClusterView) -> None:
        self._notify("task_removed", {"task_id": task_id, "cluster": cluster})
