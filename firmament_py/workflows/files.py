"""Workflow files: JSON (and YAML, through PyYAML, which Dask already requires) read into a
`Workflow` and an optional `Platform`, and written back. docs/workflows.md documents the format:

```json
{
  "name": "word-count",
  "tasks": [{"id": "split", "size": 2}, {"id": "count0", "size": 5, "job": "wc"}],
  "arcs": [{"from": "split", "to": "count0", "data": 1.5}],
  "platform": {"machines": 4, "network": "links", "capacity": 1}
}
```

`tasks` is required (each with `id` and `size`, optionally `job`); `arcs` (`from`, `to`, `data`,
data 0 if absent) and `platform` are optional. A platform is either `{"machines": N, "speed": S,
"network": "links", "capacity": C}` (identical servers, each with an upload and a download link)
or `{"machines": N, "network": "shared", "channels": K, "capacity": C}`, or explicit lists:
`{"speeds": [...], "network": "links", "upload": [...], "download": [...]}` or
`{"speeds": [...], "network": "shared", "channels": [...]}`. Errors name the file and the
element (`tasks[3]`, `arcs[0]`, `platform.speeds`).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from firmament_py.workflows.model import NetworkKind, Platform, Workflow, WorkflowError

__all__ = [
    "platform_from_dict",
    "read_workflow",
    "workflow_from_dict",
    "workflow_to_dict",
    "write_workflow",
]

YAML_SUFFIXES = (".yaml", ".yml")


def _yaml() -> Any:
    """PyYAML (untyped), imported only for YAML files."""
    return importlib.import_module("yaml")


def _is_yaml(path: Path) -> bool:
    return path.suffix.lower() in YAML_SUFFIXES


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise WorkflowError(f"{where}: expected a number, got {value!r}")
    return float(value)


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise WorkflowError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _only(fields: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(fields) - allowed)
    if unknown:
        raise WorkflowError(
            f"{where}: unknown field {unknown[0]!r} (known: {', '.join(sorted(allowed))})"
        )


def workflow_from_dict(document: object) -> tuple[Workflow, Platform | None]:
    """The workflow (and the platform, if given) a parsed file describes."""
    top = _object(document, "the file")
    _only(top, {"name", "tasks", "arcs", "platform"}, "the file")
    if "tasks" not in top:
        raise WorkflowError("the file has no 'tasks'")
    tasks = top["tasks"]
    if not isinstance(tasks, list) or not tasks:
        raise WorkflowError("'tasks' must be a non-empty list")
    sizes: list[tuple[str, float]] = []
    jobs: dict[str, str] = {}
    for i, item in enumerate(tasks):
        where = f"tasks[{i}]"
        task = _object(item, where)
        _only(task, {"id", "size", "job"}, where)
        for required in ("id", "size"):
            if required not in task:
                raise WorkflowError(f"{where}: no {required!r}")
        name = task["id"]
        if not isinstance(name, str) or not name:
            raise WorkflowError(f"{where}: 'id' must be a non-empty string, got {name!r}")
        size = task["size"]
        if isinstance(size, bool) or not isinstance(size, int | float):
            raise WorkflowError(f"{where} ({name!r}): 'size' must be a number, got {size!r}")
        sizes.append((name, float(size)))
        if "job" in task:
            jobs[name] = task["job"]
    if jobs and len(jobs) != len(sizes):
        missing = next(name for name, _ in sizes if name not in jobs)
        raise WorkflowError(f"task {missing!r} has no 'job' while others have one")
    arcs = top.get("arcs", [])
    if not isinstance(arcs, list):
        raise WorkflowError("'arcs' must be a list")
    edges: list[tuple[str, str, float]] = []
    for i, item in enumerate(arcs):
        where = f"arcs[{i}]"
        arc = _object(item, where)
        _only(arc, {"from", "to", "data"}, where)
        for required in ("from", "to"):
            if required not in arc:
                raise WorkflowError(f"{where}: no {required!r}")
        data = arc.get("data", 0.0)
        edges.append((arc["from"], arc["to"], _number(data, f"{where}: 'data'")))
    workflow = Workflow.build(sizes, edges, jobs or None)
    platform = platform_from_dict(top["platform"]) if "platform" in top else None
    return workflow, platform


def platform_from_dict(document: object) -> Platform:
    """A platform from its description (see the module docstring)."""
    spec = _object(document, "platform")
    _only(
        spec,
        {"machines", "speed", "speeds", "network", "capacity", "channels", "upload", "download"},
        "platform",
    )
    network = spec.get("network", "links")
    if network not in {kind.value for kind in NetworkKind}:
        raise WorkflowError(f"platform.network: unknown network {network!r}; known: links, shared")
    if "speeds" in spec:
        speeds = spec["speeds"]
        if not isinstance(speeds, list):
            raise WorkflowError("platform.speeds: expected a list of numbers")
        speed_values = tuple(_number(s, f"platform.speeds[{i}]") for i, s in enumerate(speeds))
        if network == "links":
            upload = tuple(_number(c, "platform.upload") for c in spec.get("upload", []))
            download = tuple(_number(c, "platform.download") for c in spec.get("download", []))
            return Platform(speed_values, NetworkKind.LINKS, upload=upload, download=download)
        channels = spec.get("channels", [])
        if not isinstance(channels, list):
            raise WorkflowError("platform.channels: with 'speeds', expected a list of capacities")
        return Platform(
            speed_values,
            NetworkKind.SHARED,
            channels=tuple(_number(c, "platform.channels") for c in channels),
        )
    machines = spec.get("machines")
    if isinstance(machines, bool) or not isinstance(machines, int):
        raise WorkflowError(f"platform.machines: expected an integer, got {machines!r}")
    speed = _number(spec.get("speed", 1.0), "platform.speed")
    capacity = _number(spec.get("capacity", 1.0), "platform.capacity")
    if network == "links":
        return Platform.links(machines, speed=speed, capacity=capacity)
    channels = spec.get("channels", 1)
    if isinstance(channels, bool) or not isinstance(channels, int):
        raise WorkflowError(f"platform.channels: expected an integer, got {channels!r}")
    return Platform.shared(machines, channels=channels, speed=speed, capacity=capacity)


def workflow_to_dict(
    workflow: Workflow, platform: Platform | None = None, *, name: str | None = None
) -> dict[str, Any]:
    """The file description of `workflow` (and `platform`): what `workflow_from_dict` reads."""
    single_job = len(workflow.jobs) == 1
    document: dict[str, Any] = {}
    if name:
        document["name"] = name
    document["tasks"] = [
        {"id": task, "size": workflow.sizes[v]}
        | ({} if single_job else {"job": workflow.jobs[workflow.job_of[v]]})
        for v, task in enumerate(workflow.tasks)
    ]
    document["arcs"] = [
        {"from": workflow.tasks[u], "to": workflow.tasks[v], "data": data}
        for u, v, data in workflow.edges
    ]
    if platform is not None:
        document["platform"] = platform.to_dict()
    return document


def read_workflow(path: str | Path) -> tuple[Workflow, Platform | None]:
    """Read a JSON or YAML (.yaml, .yml) workflow file. WorkflowError names the file and the
    offending element."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise WorkflowError(f"{path}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise WorkflowError(f"{path}: not UTF-8 text: {error}") from None
    try:
        document = _yaml().safe_load(text) if _is_yaml(path) else json.loads(text)
    except json.JSONDecodeError as error:
        raise WorkflowError(f"{path}: not JSON: {error}") from None
    except Exception as error:  # yaml.YAMLError and its subclasses
        raise WorkflowError(f"{path}: not YAML: {error}") from None
    try:
        return workflow_from_dict(document)
    except WorkflowError as error:
        raise WorkflowError(f"{path}: {error}") from None


def write_workflow(
    path: str | Path,
    workflow: Workflow,
    platform: Platform | None = None,
    *,
    name: str | None = None,
) -> Path:
    """Write `workflow` (and `platform`) as JSON, or YAML if the name ends in .yaml/.yml."""
    path = Path(path)
    document = workflow_to_dict(workflow, platform, name=name)
    if _is_yaml(path):
        path.write_text(_yaml().safe_dump(document, sort_keys=False), encoding="utf-8")
    else:
        path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return path
