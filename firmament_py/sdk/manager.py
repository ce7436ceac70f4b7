"""Selecting a policy and asking it questions: the typed, checked facade over pluggy.

pluggy's hook calls take keyword arguments and return whatever a plugin returned. The scheduler
must not trust that: the flow graph's compiled solvers assume valid values, and a policy is
third-party code. So the scheduler never calls pluggy directly; it calls `PolicyManager`, which
has one typed method per hook, checks every answer, and turns every failure (a bad answer or an
exception inside a hook) into one `PolicyError` that names the policy, the hook call and the
offending value, for the scheduler to isolate and report.

Policies are found through the entry-point group `firmament_py.policies`: the entry point's name
is the policy's name, and its object is a module, an instance, or a class (instantiated with no
arguments). Built-in policies register through the same group; only the selected one is loaded.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import pluggy

from firmament_py.model.cluster import ClusterState
from firmament_py.model.ids import EquivClassId, MachineId, RackId, TaskId
from firmament_py.model.resources import NO_RESOURCES, Resources
from firmament_py.sdk import hookspecs
from firmament_py.sdk.defaults import FirmamentDefaults, free_slots_arc, leaf_arc
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
    _machine_stats,
    _model_ref,
    arc_descriptor_problem,
)

__all__ = [
    "DEFAULTS_PLUGIN_NAME",
    "POLICY_ENTRY_POINT_GROUP",
    "PolicyError",
    "PolicyManager",
    "UnknownPolicyError",
    "available_policies",
    "load_policy",
    "unknown_policy",
]

POLICY_ENTRY_POINT_GROUP = "firmament_py.policies"
DEFAULTS_PLUGIN_NAME = "firmament-defaults"
"""The name the built-in defaults are registered under; no policy may take it."""


class PolicyError(Exception):
    """A policy could not be loaded, or one of its hooks failed or answered wrongly.

    `policy` is the selected policy's name, `hook` the hook concerned (None for loading
    errors), and the message names the call and the offending value.
    """

    def __init__(self, policy: str, problem: str, *, hook: str | None = None) -> None:
        super().__init__(f"policy {policy!r}: {problem}")
        self.policy = policy
        self.problem = problem
        self.hook = hook

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle by constructor arguments (the default would pass only the message), so the
        # error survives a trip from a sweep's worker process.
        return (type(self), (self.policy, self.problem), {"hook": self.hook})


class UnknownPolicyError(PolicyError):
    """No installed policy has the requested name; `known` lists those that exist."""

    def __init__(self, policy: str, known: Sequence[str]) -> None:
        self.known = tuple(known)
        listing = ", ".join(self.known) if self.known else "none are installed"
        super().__init__(
            policy,
            f"no such policy in entry-point group {POLICY_ENTRY_POINT_GROUP!r} "
            f"(known policies: {listing})",
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.policy, self.known))


# ---------------------------------------------------------------------- discovery


def _policy_entry_points() -> dict[str, list[importlib.metadata.EntryPoint]]:
    """The installed policies' entry points by name; a name may have several (a conflict)."""
    found: dict[str, list[importlib.metadata.EntryPoint]] = {}
    for entry_point in importlib.metadata.entry_points(group=POLICY_ENTRY_POINT_GROUP):
        same_name = found.setdefault(entry_point.name, [])
        # One distribution can be seen twice (say, an editable install on two path entries).
        if all(other.value != entry_point.value for other in same_name):
            same_name.append(entry_point)
    return found


def available_policies() -> list[str]:
    """The names of the installed policies, sorted."""
    return sorted(_policy_entry_points())


def unknown_policy(name: str) -> str | None:
    """Why `name` is no installed policy ("unknown policy ...; installed: ..."), None if it is
    one: what a command or the daemon says of a name it checks before anything loads it."""
    installed = available_policies()
    if name in installed:
        return None
    return f"unknown policy {name!r}; installed: {', '.join(installed) or 'none'}"


def load_policy(name: str) -> PolicyManager:
    """Load the installed policy `name` (and no other) and return its manager.

    Raises UnknownPolicyError (listing the known names) if no policy has that name, and
    PolicyError if two distributions claim the name or the policy fails to load.
    """
    entry_points = _policy_entry_points()
    candidates = entry_points.get(name)
    if not candidates:
        raise UnknownPolicyError(name, sorted(entry_points))
    if len(candidates) > 1:
        claims = ", ".join(repr(entry_point.value) for entry_point in candidates)
        raise PolicyError(name, f"several entry points claim this name: {claims}")
    entry_point = candidates[0]
    try:
        plugin = entry_point.load()
        if isinstance(plugin, type):
            plugin = plugin()
    except Exception as exc:
        raise PolicyError(
            name, f"cannot load {entry_point.value!r}: {type(exc).__name__}: {exc}"
        ) from exc
    return PolicyManager(plugin, name=name)


# ---------------------------------------------------------------------- the manager


def _describe_call(hook: str, arguments: Mapping[str, object]) -> str:
    shown = ", ".join(f"{key}={value!r}" for key, value in arguments.items() if key != "cluster")
    return f"{hook}({shown})"


_Caller = Callable[[dict[str, object]], object]
"""Asks one hook, given its arguments by name."""


def _pluggy_call(hook_caller: Callable[..., object]) -> _Caller:
    """Ask every implementation through pluggy."""

    def call(arguments: dict[str, object]) -> object:
        return hook_caller(**arguments)

    return call


def _direct_call(method: Callable[..., object]) -> _Caller:
    """Call `method` with the arguments its signature names, as pluggy would.

    The arguments are picked out by position when the signature allows it, which spares a
    dict per call (rounds make 10^4-10^5 such calls).
    """
    parameters = inspect.signature(method).parameters.values()
    accepted = tuple(parameter.name for parameter in parameters)
    if any(parameter.kind is not parameter.POSITIONAL_OR_KEYWORD for parameter in parameters):

        def by_name(arguments: dict[str, object]) -> object:
            return method(**{name: arguments[name] for name in accepted})

        return by_name
    return _positional_call(method, accepted)


def _positional_call(method: Callable[..., object], accepted: tuple[str, ...]) -> _Caller:
    """Call `method` with the arguments named `accepted`, in that order, by position."""
    if not accepted:
        return lambda arguments: method()
    if len(accepted) == 1:
        (only,) = accepted
        return lambda arguments: method(arguments[only])
    pick = operator.itemgetter(*accepted)
    return lambda arguments: method(*pick(arguments))


def _no_answers(arguments: dict[str, object]) -> list[object]:
    return []


def _policy_call(hook: str, hook_caller: pluggy.HookCaller, defaults: FirmamentDefaults) -> _Caller:
    """Ask `hook` of a policy that implements it, as pluggy would.

    When the policy has one plain implementation of the hook (no wrapper, no positional
    parameter with a default), pluggy's call comes down to: ask the policy, and if it
    answers None, the defaults (for a notification: a list of the answer, if not None). That is
    done here directly: a third of the cost of asking through pluggy (1.2 against 3.7 us for
    the trivial policy's `task_to_unscheduled`, checks included). Anything else (wrappers,
    several implementations, parameters with defaults) goes through pluggy.
    """
    own = [impl for impl in hook_caller.get_hookimpls() if impl.plugin_name != DEFAULTS_PLUGIN_NAME]
    if len(own) != 1:
        return _pluggy_call(hook_caller)
    (impl,) = own
    if impl.wrapper or impl.hookwrapper or impl.kwargnames:
        return _pluggy_call(hook_caller)
    ask_policy = _positional_call(impl.function, tuple(impl.argnames))
    if hook not in hookspecs.ANSWER_HOOKS:

        def notify(arguments: dict[str, object]) -> object:
            answer = ask_policy(arguments)
            return [] if answer is None else [answer]

        return notify
    ask_defaults = _direct_call(getattr(defaults, hook))

    def first_answer(arguments: dict[str, object]) -> object:
        answer = ask_policy(arguments)
        return ask_defaults(arguments) if answer is None else answer

    return first_answer


def _is_sequence(value: object) -> bool:
    if type(value) is tuple or type(value) is list:  # the usual answers, without the ABC check
        return True
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _equiv_class_problem(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | str):
        return "is not an equivalence class (an int or a str)"
    if value == "":
        return "is an empty str"
    return None


def _default_statistics_pass(cluster: ClusterView) -> dict[ResourceRef, ResourceStats]:
    """What `PolicyManager.statistics_pass` returns when the defaults answer all three
    statistics hooks, without calling them: the same values, keys and order.

    The defaults are the package's own pure functions, so no policy can observe the calls
    skipped here. A machine's statistics are `ResourceStats.of_machine`; a rack's or pod's are
    the sum of its children's (`prepare_stats` gives `ResourceStats()`, `gather_stats` adds each
    child's, `update_stats` returns the sum). Sums are taken field by field rather than child by
    child: the model keeps every resource value non-negative, so a sum overflows int64 exactly
    when one of the pairwise sums would. Any exception (such an overflow) is left to the checked
    pass, which fails the same way and reports it.

    A machine whose statistics from the previous pass (`cluster`'s) still hold, field by field
    (its resource vectors the very same objects), keeps that object: most machines do from one
    round to the next, and the graph manager then sees at once (`is`) that nothing changed.
    """
    state = cluster._state
    previous = cluster._stats
    machine_kind, rack_kind, pod_kind = ResourceKind.MACHINE, ResourceKind.RACK, ResourceKind.POD
    final: dict[ResourceRef, ResourceStats] = {}
    machine_stats: dict[MachineId, ResourceStats] = {}
    for machine_id, machine in state.machines.items():
        ref = _model_ref(machine_kind, machine_id)
        stats = previous.get(ref)
        if (
            type(stats) is not ResourceStats
            or stats.machines != 1
            or stats.slots != machine.slots
            or stats.running_tasks != len(machine.running_task_ids)
            or stats.capacity is not machine.capacity
            or stats.reserved is not machine.reserved
            or stats.measured_usage is not (machine.measured_usage or NO_RESOURCES)
        ):
            stats = _machine_stats(ResourceStats, machine)
        final[ref] = stats
        machine_stats[machine_id] = stats
    rack_stats: dict[RackId, ResourceStats] = {}
    for rack_id, rack in state.racks.items():
        stats = _sum_stats([machine_stats[machine_id] for machine_id in rack.machine_ids])
        final[_model_ref(rack_kind, rack_id)] = stats
        rack_stats[rack_id] = stats
    for pod_id, pod in state.pods.items():
        stats = _sum_stats([rack_stats[rack_id] for rack_id in pod.rack_ids])
        final[_model_ref(pod_kind, pod_id)] = stats
    return final


def _default_resource_arcs(
    ref: ResourceRef, children: Sequence[ResourceRef], cluster: ClusterView
) -> tuple[list[ArcDescriptor], ArcDescriptor | None]:
    """What `PolicyManager.resource_arcs` returns when the defaults answer both
    `resource_to_resource` and `leaf_to_sink`, without the calls and their checks: the same
    descriptors (the defaults' own functions make them, valid by construction). A machine
    with more tasks pinned to it than slots raises, as does a child no statistics pass has
    reached; the checked calls then fail the same way and report it."""
    stats = cluster._stats
    preemption = cluster.preemption_enabled
    topology = [free_slots_arc(stats[child], preemption_enabled=preemption) for child in children]
    if ref.kind is not ResourceKind.MACHINE:
        return topology, None
    machine = cluster._state.machines[ref.id]
    if not preemption and machine.slots < len(machine.running_task_ids):
        raise ValueError("more tasks pinned than slots")
    return topology, leaf_arc(machine.slots)


def _sum_stats(children: list[ResourceStats]) -> ResourceStats:
    """`ResourceStats()` plus each of `children` (checked: it raises where a sum would)."""
    return ResourceStats(
        machines=sum([child.machines for child in children]),
        slots=sum([child.slots for child in children]),
        running_tasks=sum([child.running_tasks for child in children]),
        capacity=_sum_resources([child.capacity for child in children]),
        reserved=_sum_resources([child.reserved for child in children]),
        measured_usage=_sum_resources([child.measured_usage for child in children]),
    )


def _sum_resources(vectors: list[Resources]) -> Resources:
    return Resources(
        cpu_millicores=sum([vector.cpu_millicores for vector in vectors]),
        ram_bytes=sum([vector.ram_bytes for vector in vectors]),
        disk_bytes=sum([vector.disk_bytes for vector in vectors]),
        net_rx_bytes_per_s=sum([vector.net_rx_bytes_per_s for vector in vectors]),
        net_tx_bytes_per_s=sum([vector.net_tx_bytes_per_s for vector in vectors]),
    )


class PolicyManager:
    """One selected policy on top of the built-in defaults, asked through typed methods.

    Each method has the name and keyword arguments of its hook (see `hookspecs`) and returns a
    checked answer or raises `PolicyError`. `preemption_enabled` is asked once, here.
    """

    def __init__(self, policy: object, *, name: str) -> None:
        """Register `policy` (a module or an instance) under `name`, then the defaults.

        Raises PolicyError if the name is reserved, the policy is a class rather than an
        instance, implements a hook that does not exist or with arguments the hook does not
        have, defines a hook-named function without marking it with `hookimpl`, or gives a
        wrong answer to `preemption_enabled`.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"a policy name must be a non-empty str, got {name!r}")
        self.name = name
        if name == DEFAULTS_PLUGIN_NAME:
            raise PolicyError(name, "this name is reserved for the built-in defaults")
        if isinstance(policy, type):
            raise PolicyError(
                name, f"{policy.__name__} is a class; register an instance of it (or a module)"
            )
        manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        manager.add_hookspecs(hookspecs)
        try:
            manager.register(policy, name=name)
            manager.check_pending()
        except (pluggy.PluginValidationError, ValueError) as exc:
            raise PolicyError(name, f"is not a valid policy plugin: {exc}") from exc
        # Last and trylast: pluggy puts each new trylast implementation at the very end of the
        # calling order, so the defaults are asked after everything the policy implements,
        # its own trylast implementations included (registered first, they would not be).
        defaults = FirmamentDefaults()
        manager.register(defaults, name=DEFAULTS_PLUGIN_NAME)
        unmarked = [
            hook
            for hook in hookspecs.ALL_HOOKS
            if callable(getattr(policy, hook, None))
            and manager.parse_hookimpl_opts(policy, hook) is None
        ]
        if unmarked:
            raise PolicyError(
                name,
                f"defines {', '.join(unmarked)} without marking it with "
                "firmament_py.sdk.hookimpl, so pluggy would never call it",
            )
        self._plugin_manager = manager
        self._policy = policy
        self._policy_hooks = frozenset(
            caller.name for caller in manager.get_hookcallers(policy) or ()
        )
        # A hook the policy does not implement has one answer, the defaults': ask them directly
        # (pluggy's dispatch is most of a hook call's cost, and rounds make 10^5 calls); one it
        # does not implement among the notifications has nothing to call at all. One it
        # implements plainly is asked directly too, the defaults after it (`_policy_call`).
        self._callers: dict[str, _Caller] = {}
        for hook in hookspecs.ALL_HOOKS:
            if hook in self._policy_hooks:
                self._callers[hook] = _policy_call(hook, getattr(manager.hook, hook), defaults)
            elif hook in hookspecs.ANSWER_HOOKS:
                self._callers[hook] = _direct_call(getattr(defaults, hook))
            else:
                self._callers[hook] = _no_answers
        # The defaults answer every statistics hook: the pass can skip the hook calls.
        self._default_statistics = not self._policy_hooks.intersection(hookspecs.STATISTICS_HOOKS)
        # And both arcs out of resources: `resource_arcs` can skip those calls; likewise the
        # arcs from classes to resources (`class_arcs`).
        self._default_resource_arcs = not self._policy_hooks.intersection(
            ("resource_to_resource", "leaf_to_sink")
        )
        self._default_class_arcs = not self._policy_hooks.intersection(
            ("equiv_class_preference_arcs", "equiv_class_to_resource")
        )
        answer = self._ask("preemption_enabled", {})
        if type(answer) is not bool:
            raise self._wrong("preemption_enabled", {}, answer, "expected a bool")
        self.preemption_enabled: bool = answer

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
        if not _is_sequence(value):
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
            problem = _equiv_class_problem(item)
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

    def resource_arcs(
        self, ref: ResourceRef, children: Sequence[ResourceRef], cluster: ClusterView
    ) -> tuple[list[ArcDescriptor], ArcDescriptor | None]:
        """The arcs out of resource `ref`: `resource_to_resource` to each of its `children`,
        in order, and for a machine `leaf_to_sink` (None for a rack or pod), checked.

        When the policy leaves both hooks to the defaults (most policies do), the answers are
        made without the calls: the same values, as `_default_resource_arcs` explains.
        """
        if self._default_resource_arcs and type(cluster) is ClusterView:
            try:
                return _default_resource_arcs(ref, children, cluster)
            except Exception:  # the checked calls below fail the same way and report it
                pass
        parent = ResourceView(ref, cluster)
        topology = [
            self.resource_to_resource(
                parent=parent, child=ResourceView(child, cluster), cluster=cluster
            )
            for child in children
        ]
        if ref.kind is not ResourceKind.MACHINE:
            return topology, None
        machine = MachineView(cluster._state.machines[ref.id])
        return topology, self.leaf_to_sink(machine=machine, cluster=cluster)

    def class_arcs(
        self, equiv_class: EquivClassId, cluster: ClusterView
    ) -> list[tuple[ResourceRef, ArcDescriptor]]:
        """The arcs from class `equiv_class` to resources, checked: each resource
        `equiv_class_preference_arcs` names, in order, with its `equiv_class_to_resource`.

        When the policy leaves both hooks to the defaults, the resources are the defaults'
        answer (live machines, each once) and each arc is made without a call: the defaults'
        own function, `free_slots_arc`, gives the same value. Anything amiss (a resource no
        statistics pass reached) falls back to the checked calls, which report it.
        """
        if self._default_class_arcs and type(cluster) is ClusterView:
            try:
                arguments: dict[str, object] = {"equiv_class": equiv_class, "cluster": cluster}
                refs = cast(
                    Sequence[ResourceRef],
                    self._callers["equiv_class_preference_arcs"](arguments),
                )
                stats, preemption = cluster._stats, cluster.preemption_enabled
                return [
                    (ref, free_slots_arc(stats[ref], preemption_enabled=preemption)) for ref in refs
                ]
            except Exception:  # the checked calls below fail the same way and report it
                pass
        refs = self.equiv_class_preference_arcs(equiv_class=equiv_class, cluster=cluster)
        return [
            (
                ref,
                self.equiv_class_to_resource(
                    equiv_class=equiv_class, resource=ResourceView(ref, cluster), cluster=cluster
                ),
            )
            for ref in refs
        ]

    def statistics_pass(self, cluster: ClusterView) -> dict[ResourceRef, ResourceStats]:
        """Run the statistics pass over the whole resource topology and return every live
        resource's final statistics: machines, then racks, then pods, each prepared, gathered
        from its children in the order they joined, and updated.

        The topology is the cluster model's pod / rack / machine tree, so the pass needs no
        graph; the scheduler installs the result as the statistics its `ClusterView` serves.
        """
        if self._default_statistics and type(cluster) is ClusterView:
            try:
                return _default_statistics_pass(cluster)
            except Exception:  # the checked pass below fails the same way and reports it
                pass
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
