"""Tests of `firmament_py.sim.sweep`: a grid of simulations expanded, parsed, run on Dask
distributed and written out.

The runs are tiny (the synthetic "small" preset for 10-20 simulated seconds) and use accounting
"none", under which a run is deterministic: a sweep's rows must equal `run_job` + `summarize` in
this process, but for the wall-clock timings. One local-cluster sweep (two workers) is run per
module and shared; another test starts a cluster itself and hands the sweep its address. Every
test that starts processes checks that none is left behind.
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from rich.console import Console

from firmament_py.sim.report import summarize
from firmament_py.sim.runner import SimulationJob, run_job
from firmament_py.sim.sweep import (
    DEFAULT_METRIC,
    METRICS,
    SWEEP_FILES,
    SweepResult,
    SweepRow,
    SweepSpec,
    check_metric,
    parse_param,
    parse_sweep_arguments,
    run_and_summarize,
    run_sweep,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
BASE = SimulationJob(synthetic="small", duration_s=10.0, accounting="none")
MISSING_POLICY = "no-such-policy"
WALL_CLOCK = {"wall_seconds", "algorithm_runtime_s"}
"""Summary fields measured on the wall clock; everything else is deterministic under "none"."""


def _children() -> set[int]:
    """This process's descendants, less multiprocessing's resource tracker: spawning the first
    worker starts it, and it serves this process until it exits (it is started once, not per
    cluster)."""
    pids = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if any("resource_tracker" in part for part in child.cmdline()):
                continue
        except psutil.Error:  # gone already
            continue
        pids.add(child.pid)
    return pids


@pytest.fixture
def no_leaks() -> Iterator[None]:
    """Fail if the test leaves a child process (a worker, a nanny) running."""
    before = _children()
    yield
    left = {pid for pid in _children() - before if psutil.pid_exists(pid)}
    assert not left, f"processes left behind: {sorted(left)}"


def _deterministic(summary: dict[str, Any]) -> dict[str, Any]:
    values = {key: value for key, value in summary.items() if key not in WALL_CLOCK}
    values["algorithm_runtime_s_count"] = summary["algorithm_runtime_s"]["count"]
    return values


# ---------------------------------------------------------------------- the grid


def test_jobs_expand_in_grid_order_with_labels() -> None:
    spec = SweepSpec(
        base=BASE,
        policies=["trivial", "quincy"],
        solvers=["cost-scaling", "relaxation"],
        params={"machines": [10, 20], "load": ["0.5", 1]},
        seeds=[1, 2],
    )
    jobs = spec.jobs()
    assert len(jobs) == len(spec) == 2 * 2 * 2 * 2 * 2
    grid = itertools.product(
        ["trivial", "quincy"], ["cost-scaling", "relaxation"], [10, 20], [0.5, 1.0], [1, 2]
    )
    for job, (policy, solver, machines, load, seed) in zip(jobs, grid, strict=True):
        assert (job.policy, job.solver, job.machines, job.load, job.seed) == (
            policy,
            solver,
            machines,
            load,
            seed,
        )
        assert job.duration_s == BASE.duration_s and job.accounting == "none"
    assert jobs[0].label == "trivial/cost-scaling/machines=10/load=0.5/seed=1"
    assert jobs[1].label == "trivial/cost-scaling/machines=10/load=0.5/seed=2"
    assert jobs[3].label == "trivial/cost-scaling/machines=10/load=1/seed=2"
    assert jobs[-1].label == "quincy/relaxation/machines=20/load=1/seed=2"
    assert len({job.label for job in jobs}) == len(jobs)
    assert spec.jobs() == jobs  # deterministic
    assert isinstance(jobs[0].load, float)


def test_an_empty_axis_is_the_base_jobs_own() -> None:
    base = SimulationJob(
        policy="quincy", solver="relaxation", synthetic="small", seed=7, duration_s=5
    )
    jobs = SweepSpec(base=base).jobs()
    assert [job.label for job in jobs] == ["quincy/relaxation/seed=7"]
    assert jobs[0] == SimulationJob(
        policy="quincy",
        solver="relaxation",
        synthetic="small",
        seed=7,
        duration_s=5,
        label="quincy/relaxation/seed=7",
    )


def test_sweeping_a_trace_clears_the_synthetic_preset(tmp_path: Path) -> None:
    jobs = SweepSpec(base=BASE, params={"trace": [str(tmp_path)]}).jobs()
    assert jobs[0].trace == str(tmp_path) and jobs[0].synthetic is None


# ---------------------------------------------------------------------- parsing


def test_parse_sweep_arguments_converts_by_field_type() -> None:
    base = SimulationJob(synthetic="small", seed=5)
    spec = parse_sweep_arguments(
        ["trivial", "quincy"],
        [],
        [
            "load=0.5,1.0,1.5",
            "machines=100, 300,none",
            "requests=yes,no",
            "round-interval=0,2.5",
            "duration=30",
            "accounting=none",
        ],
        3,
        base,
    )
    assert spec.policies == ("trivial", "quincy")
    assert spec.solvers == ("cost-scaling",)
    assert spec.seeds == (5, 6, 7)
    assert dict(spec.params) == {
        "load": (0.5, 1.0, 1.5),
        "machines": (100, 300, None),
        "resource_requests": (True, False),
        "round_interval_s": (0.0, 2.5),
        "duration_s": (30.0,),
        "accounting": ("none",),
    }
    assert len(spec.jobs()) == 2 * 3 * 3 * 2 * 2 * 3
    label = spec.jobs()[0].label
    assert label == (
        "trivial/cost-scaling/load=0.5/machines=100/resource_requests=true/"
        "round_interval_s=0/duration_s=30/accounting=none/seed=5"
    )
    assert parse_param("speedup=2") == ("speedup", (2.0,))
    assert parse_param("synthetic=small,google-100") == ("synthetic", ("small", "google-100"))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (["mahcines=1"], "unknown parameter 'mahcines'; a sweep can vary: accounting"),
        (["machines=1.5"], "parameter machines: cannot read '1.5' as a finite int (or none)"),
        (["load=heavy"], "parameter load: cannot read 'heavy' as a finite float"),
        (["load=nan"], "cannot read 'nan' as a finite float"),
        (["strict=maybe"], "parameter strict: cannot read 'maybe' as true or false"),
        (["speedup=none"], "cannot read 'none' as a finite float"),
        (["accounting=fast"], "parameter accounting: 'fast' is not one of algorithm, solver"),
        (["policy=quincy"], "'policy' cannot be a --param: give policies with --policy"),
        (["seed=1,2"], "'seed' cannot be a --param: give the number of seeds with --seeds"),
        (["solver_options=x"], "'solver_options' cannot be a --param"),
        (["load"], "--param 'load': expected NAME=V1,V2,..."),
        (["=1"], "--param '=1': expected NAME=V1,V2,..."),
        (["load="], "--param 'load=': empty value in the list"),
        (["load=1,,2"], "--param 'load=1,,2': empty value in the list"),
        (["load=1,1.0"], "parameter load: 1 given more than once"),
        (["load=1", "load=2"], "--param load is given twice"),
        (["duration=1", "duration_s=2"], "--param duration_s is given twice"),
        (["synthetic=small", "trace=/tmp"], "sweep either synthetic presets or trace"),
        (["duration=-1"], "trivial/cost-scaling/duration_s=-1/seed=0: the duration must be"),
        (["synthetic=nosuch"], "synthetic=nosuch/seed=0: unknown synthetic workload preset"),
    ],
)
def test_parse_errors_name_the_problem(params: list[str], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_sweep_arguments([], [], params, 1, BASE)
    assert message in str(caught.value)


def test_parse_refuses_unknown_policies_solvers_and_seed_counts() -> None:
    with pytest.raises(ValueError, match=r"unknown policy 'no-such-policy'; installed: .*quincy"):
        parse_sweep_arguments(["trivial", MISSING_POLICY], [], [], 1, BASE)
    with pytest.raises(ValueError, match="unknown solver 'simplex'; known: relaxation"):
        parse_sweep_arguments([], ["simplex"], [], 1, BASE)
    with pytest.raises(ValueError, match="policies: trivial given more than once"):
        parse_sweep_arguments(["trivial", "trivial"], [], [], 1, BASE)
    for seeds in (0, -2):
        with pytest.raises(ValueError, match="--seeds must be a positive number"):
            parse_sweep_arguments([], [], [], seeds, BASE)
    with pytest.raises(ValueError, match="seed=-1: the seed must be a non-negative int"):
        parse_sweep_arguments([], [], ["load=1,2"], 2, dataclasses.replace(BASE, seed=-1))
    with pytest.raises(ValueError, match="policies: give a list of names, not one string"):
        SweepSpec(base=BASE, policies="quincy")
    # Without the check, an unknown policy is left for the run to report.
    spec = parse_sweep_arguments([MISSING_POLICY], [], [], 1, BASE, check=False)
    assert spec.policies == (MISSING_POLICY,)


def test_spec_values_must_have_the_fields_type() -> None:
    with pytest.raises(ValueError, match=r"parameter machines: 1\.5 is not a int"):
        SweepSpec(base=BASE, params={"machines": [1.5]})
    with pytest.raises(ValueError, match="give a list of values, not the string"):
        SweepSpec(base=BASE, params={"load": "0.5"})
    with pytest.raises(ValueError, match="seeds must be ints"):
        SweepSpec(base=BASE, seeds=[True])


def test_metric_names() -> None:
    assert DEFAULT_METRIC in METRICS
    assert {"placement_latency_s_p99", "rounds", "mean_graph_arcs"} <= set(METRICS)
    assert not {"workload", "algorithm", "label", "error"} & set(METRICS)
    assert check_metric("rounds") == "rounds"
    with pytest.raises(ValueError, match="unknown metric 'speed'; one of: simulated_seconds"):
        check_metric("speed")


# ---------------------------------------------------------------------- one job in-process


def test_run_and_summarize_reports_a_failure_instead_of_raising() -> None:
    good = SweepSpec(base=dataclasses.replace(BASE, duration_s=5.0)).jobs()[0]
    answer = run_and_summarize(good)
    assert answer["label"] == "trivial/cost-scaling/seed=0"
    assert answer["job"]["synthetic"] == "small" and answer["error"] is None
    assert _deterministic(answer["summary"]) == _deterministic(summarize(run_job(good)).as_dict())
    json.dumps(answer)  # plain values only

    bad = dataclasses.replace(good, policy=MISSING_POLICY)
    answer = run_and_summarize(bad)
    assert answer["summary"] is None
    assert answer["error"].startswith("UnknownPolicyError: policy 'no-such-policy'")
    assert "Traceback" in answer["traceback"]


def test_plot_without_swept_parameters_and_without_values(tmp_path: Path) -> None:
    """Rows made in-process: a categorical plot per policy/solver, and an empty one."""
    spec = SweepSpec(base=dataclasses.replace(BASE, duration_s=5.0), seeds=[0, 1])
    rows = []
    for job in spec.jobs():
        answer = run_and_summarize(job)
        rows.append(
            SweepRow(
                label=job.label,
                policy=job.policy,
                solver=job.solver,
                params={},
                seed=job.seed,
                summary=summarize(run_job(job)),
            )
        )
        assert answer["error"] is None
    result = SweepResult(spec=spec, rows=tuple(rows), workers=0, wall_seconds=0.0)
    paths = result.write(tmp_path / "a", metric="tasks_placed")
    assert paths[2].read_bytes().startswith(PNG_MAGIC)
    # Placement latency percentiles of runs where no task waited are 0; counts are numbers.
    failed = SweepResult(
        spec=spec,
        rows=tuple(
            SweepRow(row.label, row.policy, row.solver, {}, row.seed, None, "Boom: it broke")
            for row in rows
        ),
        workers=0,
        wall_seconds=0.0,
    )
    paths = failed.write(tmp_path / "b")
    assert paths[2].read_bytes().startswith(PNG_MAGIC)
    with (tmp_path / "b" / "sweep.csv").open(newline="") as file:
        records = list(csv.DictReader(file))
    assert [r["error"] for r in records] == ["Boom: it broke"] * 2
    assert records[0]["rounds"] == "" and records[0]["algorithm_runtime_s_p50"] == ""


# ---------------------------------------------------------------------- on a local cluster


SWEEP_POLICIES = ["trivial", "quincy", MISSING_POLICY]
SWEEP_DURATIONS = [20.0, 10.0]


@pytest.fixture(scope="module")
def swept() -> Iterator[tuple[SweepSpec, SweepResult, list[tuple[str, int, int]]]]:
    """One sweep on a local cluster of two workers: 2 policies x 2 durations that run, and a
    missing policy whose 2 jobs fail. The longer duration comes first, so jobs tend to finish
    out of the spec's order."""
    before = _children()
    spec = SweepSpec(
        base=BASE, policies=SWEEP_POLICIES, params={"duration_s": SWEEP_DURATIONS}, seeds=[3]
    )
    calls: list[tuple[str, int, int]] = []
    result = run_sweep(
        spec, workers=2, progress=lambda row, done, total: calls.append((row.label, done, total))
    )
    left = {pid for pid in _children() - before if psutil.pid_exists(pid)}
    assert not left, f"the sweep left processes behind: {sorted(left)}"
    yield spec, result, calls


def test_sweep_rows_keep_the_spec_order(
    swept: tuple[SweepSpec, SweepResult, list[tuple[str, int, int]]],
) -> None:
    spec, result, calls = swept
    labels = [job.label for job in spec.jobs()]
    assert [row.label for row in result.rows] == labels
    assert sorted(label for label, _, _ in calls) == sorted(labels)  # each job reported once
    assert [(done, total) for _, done, total in calls] == [(i, 6) for i in range(1, 7)]
    assert result.workers == 2 and result.address is None and result.wall_seconds > 0
    for row, job in zip(result.rows, spec.jobs(), strict=True):
        assert (row.policy, row.solver, row.seed) == (job.policy, job.solver, 3)
        assert dict(row.params) == {"duration_s": job.duration_s}


def test_sweep_rows_equal_in_process_runs(
    swept: tuple[SweepSpec, SweepResult, list[tuple[str, int, int]]],
) -> None:
    spec, result, _ = swept
    ran = [row for row in result.rows if row.ok]
    assert len(ran) == 4
    for row, job in zip(ran, [j for j in spec.jobs() if j.policy != MISSING_POLICY], strict=True):
        assert row.label == job.label and row.summary is not None
        expected = summarize(run_job(job)).as_dict()
        assert _deterministic(row.summary.as_dict()) == _deterministic(expected)
        assert row.summary.tasks_submitted > 0 and row.summary.rounds > 0


def test_a_failing_job_is_reported_and_the_others_complete(
    swept: tuple[SweepSpec, SweepResult, list[tuple[str, int, int]]],
) -> None:
    _, result, _ = swept
    assert [row.label for row in result.failed] == [
        f"{MISSING_POLICY}/cost-scaling/duration_s=20/seed=3",
        f"{MISSING_POLICY}/cost-scaling/duration_s=10/seed=3",
    ]
    for row in result.failed:
        assert row.summary is None
        assert row.error is not None and row.error.startswith("UnknownPolicyError: ")
        assert "known policies: " in row.error
        assert row.traceback is not None and "run_job" in row.traceback
    assert sum(row.ok for row in result.rows) == 4


def test_sweep_files_are_written_and_parse(
    swept: tuple[SweepSpec, SweepResult, list[tuple[str, int, int]]], tmp_path: Path
) -> None:
    _, result, _ = swept
    paths = result.write(tmp_path / "out")
    assert [p.name for p in paths] == list(SWEEP_FILES)

    with paths[0].open(newline="", encoding="utf-8") as file:
        reader = csv.DictReader(file)
        records = list(reader)
    header = reader.fieldnames
    assert header is not None
    assert header[:6] == ["label", "policy", "solver", "duration_s", "seed", "error"]
    assert "policy" not in header[6:] and "rejections" not in header
    for column in ("placement_latency_s_p50", "algorithm_runtime_s_p99", "tasks_placed"):
        assert column in header
    assert [r["label"] for r in records] == [row.label for row in result.rows]
    for record, row in zip(records, result.rows, strict=True):
        assert float(record["duration_s"]) == row.params["duration_s"]
        assert int(record["seed"]) == 3
        if row.summary is None:
            assert record["error"] == row.error and record["tasks_placed"] == ""
            continue
        assert record["error"] == ""
        assert int(record["tasks_placed"]) == row.summary.tasks_placed
        assert float(record["wall_seconds"]) == row.summary.wall_seconds
        p50 = row.summary.algorithm_runtime_s.p50
        assert p50 is not None and float(record["algorithm_runtime_s_p50"]) == p50

    saved = json.loads(paths[1].read_text(encoding="utf-8"))
    assert saved["spec"]["params"] == {"duration_s": SWEEP_DURATIONS}
    assert saved["spec"]["policies"] == SWEEP_POLICIES
    assert saved["spec"]["base"]["synthetic"] == "small"
    assert saved["workers"] == 2
    assert [r["label"] for r in saved["rows"]] == [row.label for row in result.rows]
    for saved_row, row in zip(saved["rows"], result.rows, strict=True):
        expected = None if row.summary is None else row.summary.as_dict()
        assert saved_row["summary"] == expected and saved_row["error"] == row.error

    assert paths[2].read_bytes().startswith(PNG_MAGIC)
    with pytest.raises(ValueError, match="unknown metric"):
        result.write(tmp_path / "not-written", metric="speed")
    assert not (tmp_path / "not-written").exists()


def test_sweep_table(swept: tuple[SweepSpec, SweepResult, list[tuple[str, int, int]]]) -> None:
    _, result, _ = swept
    console = Console(record=True, width=250)
    console.print(result.table(metric="mean_graph_arcs"))
    text = console.export_text()
    for row in result.rows:
        assert row.label in text
    assert "UnknownPolicyError" in text and "mean_graph_arcs" in text
    assert "6 jobs on 2 workers" in text and "2 failed" in text
    assert math.isfinite(result.rows[0].value("mean_graph_arcs") or math.nan)


def test_sweep_on_an_existing_scheduler_by_address(no_leaks: None) -> None:
    from distributed import Client, LocalCluster

    spec = SweepSpec(base=BASE, policies=["trivial", "quincy"])
    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        address = cluster.scheduler_address
        with pytest.raises(ValueError, match="workers applies to a local cluster"):
            run_sweep(spec, address=address, workers=2)
        result = run_sweep(spec, address=address)
        assert result.address == address and result.workers == 1
        assert [row.label for row in result.rows] == [
            "trivial/cost-scaling/seed=0",
            "quincy/cost-scaling/seed=0",
        ]
        for row, job in zip(result.rows, spec.jobs(), strict=True):
            assert row.ok and row.summary is not None
            expected = summarize(run_job(job)).as_dict()
            assert _deterministic(row.summary.as_dict()) == _deterministic(expected)
        # The sweep closed its own client only: the cluster still serves others.
        with Client(address) as client:
            assert len(client.nthreads()) == 1
            assert client.submit(sum, [1, 2]).result() == 3
