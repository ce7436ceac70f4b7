"""`firmament-py simulate` and `SimulationJob`: runs end to end on the bundled trace sample and
a synthetic preset, writes its files, and names bad arguments and bad input."""

from __future__ import annotations

import csv
import gzip
import json
import shutil
from importlib.resources import files
from pathlib import Path

import pytest
from click.testing import CliRunner

from firmament_py.cli import main
from firmament_py.sim.runner import SimulationJob, run_job

SAMPLE = Path(str(files("firmament_py.sim") / "data" / "google_sample"))


def test_the_bundled_trace_sample_is_simulated_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(
        main,
        [
            *("simulate", "--trace", str(SAMPLE), "--duration", "3600", "--accounting", "none"),
            *("--policy", "load-spreading", "--out", str(out), "--quiet"),
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policy"] == "load-spreading" and summary["tasks_submitted"] > 0
    assert summary["tasks_placed"] > 0 and summary["rounds"] > 0
    rounds = list(csv.DictReader((out / "rounds.csv").open()))
    assert len(rounds) == summary["rounds"]
    assert sorted(p.name for p in out.glob("*.png")) == [
        "algorithm_runtime_cdf.png",
        "algorithm_runtime_over_time.png",
        "placement_latency_cdf.png",
        "tasks_over_time.png",
    ]


def test_a_synthetic_run_prints_its_summary(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        [
            *("simulate", "--synthetic", "small", "--duration", "30", "--accounting", "none"),
            *("--no-plots", "--out", str(tmp_path / "run")),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "tasks submitted" in result.output and "load-spreading" in result.output
    assert "s loading the compiled kernels, " in result.output  # counted, beside the run
    assert not list((tmp_path / "run").glob("*.png"))


def test_runs_are_reproducible_without_wall_clock_accounting() -> None:
    job = SimulationJob(synthetic="small", duration_s=20, accounting="none", seed=3)
    first, second = run_job(job), run_job(job)
    assert [r.placed for r in first.rounds] == [r.placed for r in second.rounds]
    assert {t: r.first_start for t, r in first.tasks.items()} == {
        t: r.first_start for t, r in second.tasks.items()
    }
    assert first.workload == "synthetic small, seed 3"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--synthetic", "small", "--trace", str(SAMPLE)], "not both"),
        (["--synthetic", "nope"], "unknown synthetic workload preset 'nope'"),
        (["--policy", "nope"], "no such policy"),
        (["--duration", "0"], "0"),
    ],
)
def test_bad_arguments_are_named(arguments: list[str], message: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["simulate", "--out", str(tmp_path), *arguments])
    assert result.exit_code != 0
    assert message in result.output


def test_bad_trace_rows_are_reported_or_refused(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    shutil.copytree(SAMPLE, trace)
    packed = trace / "task_events" / "part-00001-of-00002.csv.gz"
    rows = gzip.decompress(packed.read_bytes()).decode().splitlines()
    packed.unlink()
    bad_line = 2  # early in the file: the reader stops at the first row after the window
    (trace / "task_events" / "part-00001-of-00002.csv").write_text(
        "\n".join([rows[0], "this,is,[red]not,a,task,event", *rows[1:]]) + "\n"
    )
    common = ["simulate", "--trace", str(trace), "--accounting", "none", "--no-plots"]
    common += ["--duration", "1e6"]  # the whole sample
    lenient = CliRunner().invoke(main, [*common, "--out", str(tmp_path / "a"), "--quiet"])
    assert lenient.exit_code == 0, lenient.output
    assert "bad trace row skipped" in lenient.output
    # The path stays on one line however long it is, and the row's brackets are not markup.
    assert f"part-00001-of-00002.csv:{bad_line}" in lenient.output
    assert "[red]not" in lenient.output
    strict = CliRunner().invoke(main, [*common, "--strict", "--out", str(tmp_path / "b")])
    assert strict.exit_code != 0
    assert f"part-00001-of-00002.csv:{bad_line}" in strict.output


def test_jobs_name_exactly_one_workload() -> None:
    with pytest.raises(ValueError, match="exactly one workload"):
        SimulationJob(synthetic=None, trace=None)
    with pytest.raises(ValueError, match="exactly one workload"):
        SimulationJob(synthetic="small", trace="somewhere")
    with pytest.raises(ValueError, match="'sometimes'"):
        SimulationJob(accounting="sometimes")


def test_slots_only_by_default_and_requests_for_the_policies_that_respect_them() -> None:
    slots_only = run_job(SimulationJob(synthetic="small", duration_s=30, accounting="none"))
    assert not any(r.refused for r in slots_only.rounds)
    with_requests = SimulationJob(
        policy="cpu-mem",
        synthetic="small",
        duration_s=30,
        accounting="none",
        resource_requests=True,
    )
    result = run_job(with_requests)
    assert not any(r.refused for r in result.rounds)
    assert sum(r.placed for r in result.rounds) > 0
    assert "with requests" in result.workload


def test_sweep_runs_a_grid_on_a_local_dask_cluster(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    result = CliRunner().invoke(
        main,
        [
            *("sweep", "--synthetic", "small", "--duration", "10", "--accounting", "none"),
            *("--policy", "trivial", "--param", "load=0.5,1.0", "--workers", "1"),
            *("--out", str(out), "--quiet"),
        ],
    )
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader((out / "sweep.csv").open()))
    assert [(row["policy"], row["load"]) for row in rows] == [
        ("trivial", "0.5"),
        ("trivial", "1.0"),
    ]
    assert int(rows[1]["tasks_submitted"]) > int(rows[0]["tasks_submitted"])
    assert (out / "sweep.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--param", "colour=red"], "colour"),
        (["--param", "load=lots"], "lots"),
        (["--metric", "happiness"], "happiness"),
        (["--policy", "nope"], "nope"),
    ],
)
def test_sweep_names_bad_arguments_before_running(arguments: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["sweep", "--synthetic", "small", *arguments])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_experiment_runs_at_test_scale_and_names_unknown_experiments(tmp_path: Path) -> None:
    out = tmp_path / "fig7"
    result = CliRunner().invoke(
        main, ["experiment", "fig7", "--scale", "test", "--out", str(out)], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert "Relaxation is the fastest" in result.output
    assert {p.suffix for p in out.iterdir()} >= {".csv", ".png"}
    unknown = CliRunner().invoke(main, ["experiment", "fig99"])
    assert unknown.exit_code == 2 and "fig7" in unknown.output


@pytest.mark.parametrize(
    "command",
    [
        ["simulate", "--synthetic", "small", "--duration", "10", "-q", "--out"],
        ["sweep", "--synthetic", "small", "--duration", "10", "-q", "--out"],
        ["experiment", "fig18", "--scale", "test", "-q", "--out"],
        ["keys", "generate"],
    ],
)
def test_an_output_directory_that_cannot_be_made_is_named_before_any_work(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file where a directory should go: an error naming it, exit status 1, no traceback,
    and nothing run first."""
    import firmament_py.cli.experiment as experiment_cli
    import firmament_py.cli.simulate as simulate_cli

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("ran before finding that its output cannot be written")

    for name in ("run_job", "run_sweep"):
        monkeypatch.setattr(simulate_cli, name, never)
    monkeypatch.setattr(experiment_cli, "run_experiment", never)
    (tmp_path / "a-file").write_text("not a directory")
    out = tmp_path / "a-file" / "out"
    result = CliRunner().invoke(main, [*command, str(out)])
    assert result.exit_code == 1, result.output
    assert f"cannot use {tmp_path / 'a-file'}" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "command",
    [
        ["simulate", "--synthetic", "small", "--round-interval", "nan"],
        ["simulate", "--synthetic", "small", "--duration", "inf"],
        ["simulate", "--synthetic", "small", "--load", "nan"],
        ["graphgen", "--shape", "quincy", "--machines", "10", "--utilization", "nan"],
        ["zoe", "simulate", "--load", "nan"],
        ["zoe", "simulate", "--cores", "inf"],
        ["workflow", "generate", "--rho", "nan"],
        ["nomora", "fit", "--floor", "nan", "x.csv"],
    ],
)
def test_numbers_that_are_not_finite_are_refused_as_options(command: list[str]) -> None:
    """NaN passes every range check (each comparison with it is false): it is refused by
    name, before anything runs."""
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 2, result.output
    assert "is not a finite number" in result.output


@pytest.mark.parametrize(
    "command",
    [
        ["simulate", "--synthetic", "small"],
        ["graphgen"],
        ["zoe", "simulate"],
        ["workflow", "generate", "chain"],
        ["nomora", "trace", "out.csv"],
    ],
)
def test_a_negative_seed_is_refused_by_name(command: list[str]) -> None:
    result = CliRunner().invoke(main, [*command, "--seed", "-1"])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--seed'" in result.output


@pytest.mark.parametrize("quiet", [True, False])
def test_a_failed_sweep_run_is_named_with_its_error(
    quiet: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Quiet, no table shows the failures: the message itself names the first one."""
    import firmament_py.cli.simulate as cli
    from firmament_py.sim.sweep import SweepRow

    class Failed:
        failed = (
            SweepRow(
                "trivial/cost-scaling/seed 0",
                "trivial",
                "cost-scaling",
                {},
                0,
                None,
                "ValueError: boom",
            ),
        )

        def write(self, out: Path, metric: str) -> list[Path]:
            return []

        def table(self, metric: str) -> str:
            return "the table"

    monkeypatch.setattr(cli, "run_sweep", lambda *args, **kwargs: Failed())
    arguments = ["sweep", "--synthetic", "small", "--out", str(tmp_path)]
    result = CliRunner().invoke(main, [*arguments, "-q"] if quiet else arguments)
    assert result.exit_code == 1
    assert "trivial/cost-scaling/seed 0: ValueError: boom" in result.output
    assert (f"{tmp_path}/sweep.csv" in result.output) == quiet


def test_files_that_are_not_text_and_names_that_are_paths_are_named(tmp_path: Path) -> None:
    binary = tmp_path / "w.json"
    binary.write_bytes(b"\xff\xfe\x80 not text")
    measurements = tmp_path / "m.csv"
    measurements.write_text("latency_us,performance\n10,1\n100,0.9\n500,0.8\n1000,0.5\n2000,0.3\n")
    for command, message in (
        (["workflow", "schedule", str(binary)], "not UTF-8 text"),
        (["zoe", "simulate", "--workload", str(binary)], "not JSON"),
        (["nomora", "fit", str(measurements), "--name", "a/b"], "not a plain file name"),
        (["nomora", "fit", str(measurements), "--name", ""], "not a plain file name"),
    ):
        result = CliRunner().invoke(main, command)
        assert result.exit_code in (1, 2), (command, result.output)
        assert message in result.output, (command, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit)


def test_running_out_of_memory_is_an_error_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import firmament_py.cli.simulate as cli

    def huge(*args: object, **kwargs: object) -> None:
        raise MemoryError

    monkeypatch.setattr(cli, "run_job", huge)
    result = CliRunner().invoke(main, ["simulate", "--synthetic", "small", "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "out of memory" in result.output


def test_options_of_the_other_kind_of_workload_are_refused(tmp_path: Path) -> None:
    """Ignored, they would have let a user believe they did something."""
    trace = str(SAMPLE)
    for command, message in (
        (["--synthetic", "small", "--machine-fraction", "0.5"], "samples a trace"),
        (["--synthetic", "small", "--job-fraction", "0.5"], "samples a trace"),
        (["--synthetic", "small", "--trace-start", "0"], "where to replay a trace from"),
        (["--trace", trace, "--machines", "5"], "rescale a synthetic workload"),
        (["--trace", trace, "--load", "2"], "rescale a synthetic workload"),
    ):
        result = CliRunner().invoke(main, ["simulate", *command, "--out", str(tmp_path)])
        assert result.exit_code == 2, (command, result.output)
        assert message in result.output


def test_a_zoe_policy_is_named_only_with_flow_placement_and_must_exist() -> None:
    result = CliRunner().invoke(main, ["zoe", "simulate", "--policy", "quincy"])
    assert result.exit_code == 2 and "--placement flow only" in result.output
    result = CliRunner().invoke(main, ["zoe", "simulate", "--placement", "flow", "--policy", "x"])
    assert result.exit_code == 2 and "unknown policy 'x'" in result.output


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--speedup", "1e-300"], "speed-up must be within"),
        (["--speedup", "1e300"], "speed-up must be within"),
        (["--duration", "1e300"], "duration must be under"),
    ],
)
def test_times_past_64_bits_are_refused(option: list[str], message: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["simulate", "--synthetic", "small", *option, "-q"])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_a_single_zoe_application_shows_no_nan() -> None:
    """Time-weighted over no time at all (one arrival) is no number, and is shown so."""
    result = CliRunner().invoke(main, ["zoe", "simulate", "--apps", "1"])
    assert result.exit_code == 0, result.output
    assert "n/a" in result.output and "nan" not in result.output


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["simulate", "--synthetic", "small", "--load", "1e9"], "past the limit of 10,000,000"),
        (["simulate", "--synthetic", "small", "--machines", "2000000"], "at most 1,000,000"),
        (["sweep", "--synthetic", "small", "--load", "1e9", "--quiet"], "past the limit of"),
        (["zoe", "simulate", "--apps", "99999999999"], "1<=x<=1000000"),
        (["zoe", "simulate", "--machines", "99999999999"], "1<=x<=1000000"),
    ],
)
def test_workloads_too_large_to_finish_are_refused_at_once(
    command: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sizes that would run until memory ran out are a usage error before anything runs."""
    monkeypatch.chdir(tmp_path)  # where a sweep would write
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_a_trace_table_with_no_usable_row_is_an_error(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    shutil.copytree(SAMPLE, trace)
    for part in (trace / "machine_events").iterdir():
        part.unlink()
    (trace / "machine_events" / "part-00000-of-00001.csv").write_text("not,a,machine\n")
    result = CliRunner().invoke(
        main, ["simulate", "--trace", str(trace), "--out", str(tmp_path / "out"), "--quiet"]
    )
    assert result.exit_code == 1, result.output
    assert "machine_events: no row is usable" in result.output
    assert "part-00000-of-00001.csv:1: expected 6 columns" in result.output


def test_a_trace_is_replayed_from_where_its_window_opens(tmp_path: Path) -> None:
    """Simulated time 0 is trace time 600 s by default (the 2011 trace's window opens there):
    the sample's first arrival after the machines comes within a second of the start; from
    trace time 0, ten minutes later."""
    import csv

    def first_arrival_s(*options: str) -> float:
        out = tmp_path / "-".join(options or ("default",))
        result = CliRunner().invoke(
            main,
            [
                *("simulate", "--trace", str(SAMPLE), "--duration", "900", "--no-plots"),
                *("--accounting", "none", "-q", "--out", str(out), *options),
            ],
        )
        assert result.exit_code == 0, result.output
        with (out / "tasks.csv").open() as rows:
            submitted = sorted(int(row["submit_us"]) / 1e6 for row in csv.DictReader(rows))
        return next(t for t in submitted if t > 0)

    assert first_arrival_s() < 1.0
    assert 600.0 <= first_arrival_s("--trace-start", "0") < 601.0
