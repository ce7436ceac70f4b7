"""Every command, every option that takes a name, a number or a path, given a bad value: one
clean error line, no traceback, nothing run and no output directory left behind.

The cases are made from the commands themselves (click's parameters and their types), so an
option added later is covered without a line here; what a bad value is for each kind of option
is decided once, below. Whatever a command would run with its options accepted is replaced by
a guard that fails the test, so an accepted bad value shows as a failure, not as a long run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from firmament_py.cli import COMMANDS, main

# Options that take free text with no wrong value (a label, a file name stem), with why.
FREE_TEXT = {
    ("keys", "generate", "--name"): "names the key files; a bad name is tested elsewhere",
    ("nomora", "fit", "--name"): "names the function file; a path as a name is tested elsewhere",
}

# A wrong value for each option that takes a name (free text checked against a list).
BAD_NAMES = {
    "--policy": "nosuch",
    "--solver": "nosuch",
    "--synthetic": "nosuch",
    "--sort": "nosuch",
    "--metric": "nosuch",
    "--param": "nosuch=1,2",
    "--bind": "nosuch://here",
    "--publish": "nosuch://here",
    "--address": "nosuch://here:1",
    "--dashboard": "0.0.0.0:1",
}


def _leaves(
    command: click.Command, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None
            yield from _leaves(sub, (*path, name))
    else:
        yield path, command


def _bad_values(param: click.Parameter, where: Path) -> list[str]:
    """Values of `param` that must be refused."""
    kind = param.type
    under_a_file = str(where / "a-file" / "x")
    if isinstance(kind, click.Choice):
        return ["nosuch"]
    if isinstance(kind, click.types.IntParamType | click.types.FloatParamType):
        values = ["abc"] if isinstance(kind, click.types.IntParamType) else ["abc", "nan"]
        low, high = getattr(kind, "min", None), getattr(kind, "max", None)
        values += [str(low - 1)] if low is not None else []
        values += [str(high + 1)] if high is not None else []
        return values
    if isinstance(kind, click.Path):  # a path to be made may not exist yet: that is no error
        return [str(where / "nowhere" / "x"), under_a_file] if kind.exists else [under_a_file]
    if isinstance(kind, click.File):
        return [str(where / "nowhere" / "x")]
    assert isinstance(kind, click.types.StringParamType), (param.name, kind)
    name = param.opts[0]
    assert name in BAD_NAMES, f"{name} takes free text: say what a bad value is in BAD_NAMES"
    return [BAD_NAMES[name]]


def _cases() -> Iterator[tuple[tuple[str, ...], str, str]]:
    """(command path, parameter name, bad value); `{tmp}` in a value stands for the test's
    directory."""
    for path, command in _leaves(main, ()):
        for param in command.params:
            if isinstance(param, click.Option) and (param.is_flag or param.count):
                continue
            if param.name == "help" or (*path, param.opts[0]) in FREE_TEXT:
                continue
            for value in _bad_values(param, Path("{tmp}")):
                yield path, param.name or "", value


CASES = sorted(set(_cases()))


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = main
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)
        assert found is not None, path
        command = found
    return command


def _good_values(tmp: Path) -> dict[str, str]:
    """Valid values for the parameters some commands require, by parameter name."""
    keys = tmp / "keys"
    for name in ("server", "client"):
        made = CliRunner().invoke(main, ["keys", "generate", str(keys), "--name", name])
        assert made.exit_code == 0, made.output
    measurements = tmp / "measurements.csv"
    measurements.write_text("latency_us,performance\n10,1\n100,0.9\n500,0.8\n1000,0.5\n")
    workflow = tmp / "workflow.json"
    made = CliRunner().invoke(
        main, ["workflow", "generate", "simple-mapreduce", "--output", str(workflow)]
    )
    assert made.exit_code == 0, made.output
    return {
        "name": "fig7",
        "names": "fig7",
        "directory": str(tmp / "new-keys"),
        "server_directory": str(keys),
        "client_public_key": str(keys / "client.key"),
        "measurements": str(measurements),
        "out": str(tmp / "trace.csv"),
        "kind": "simple-mapreduce",
        "file": str(workflow),
        "journal": str(tmp / "journal"),
        "output": str(tmp / "generated.json"),
    }


@pytest.fixture
def nothing_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replace what each command runs once its options are accepted with a failure."""
    import firmament_py.cli.dimacs as dimacs_cli
    import firmament_py.cli.experiment as experiment_cli
    import firmament_py.cli.simulate as simulate_cli
    import firmament_py.service.cli as service_cli
    import firmament_py.workflows.cli as workflows_cli
    import firmament_py.zoe.cli as zoe_cli

    def ran(*args: object, **kwargs: object) -> None:
        raise AssertionError("ran with a bad value")

    for owner, name in (
        (simulate_cli, "run_job"),
        (simulate_cli, "run_sweep"),
        (simulate_cli, "warm_up"),
        (experiment_cli, "run_experiment"),
        (dimacs_cli, "_write_graph"),
        (service_cli.SchedulingDaemon, "serve"),  # built: building it checks its options
        (workflows_cli, "schedule_workflow"),
        (zoe_cli, "ZoeSimulator"),
    ):
        monkeypatch.setattr(owner, name, ran)


@pytest.mark.usefixtures("nothing_runs")
@pytest.mark.parametrize(("path", "tested", "value"), CASES, ids=str)
def test_a_bad_value_is_one_clean_line(
    path: tuple[str, ...], tested: str, value: str, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    value = value.replace("{tmp}", str(tmp_path))
    command = _command(path)
    good = _good_values(tmp_path)
    not_made = tmp_path / "out-not-made"
    arguments = list(path)
    for param in command.params:
        name = param.name or ""
        if isinstance(param, click.Argument):
            if name == tested:
                arguments.append(value)
            elif param.required:
                arguments.append(good[name])
        elif name == tested:
            arguments += [param.opts[0], value]
        elif param.required:
            arguments += [param.opts[0], good[name]]
        elif name == "out":  # where an output directory would go: it must not be made
            arguments += [param.opts[0], str(not_made)]
    result = CliRunner().invoke(main, arguments)
    shown = " ".join(arguments)
    assert result.exit_code in (1, 2), (shown, result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        shown,
        result.exception,
    )
    assert "Traceback" not in result.output, shown
    errors = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(errors) == 1, (shown, result.output)
    assert result.output.rstrip().endswith(errors[0]), (shown, result.output)
    # ... and it is about this parameter, not something else that went wrong.
    param = next(p for p in command.params if p.name == tested)
    names = {*param.opts, value, param.human_readable_name, tested, tested.replace("_", " ")}
    assert any(name and name in errors[0] for name in names), (shown, errors[0])
    assert "simulated s" not in result.output, (shown, result.output)  # no progress bar left
    assert not not_made.exists(), shown


def test_every_command_is_listed_with_its_own_short_help() -> None:
    """`firmament-py --help` lists the commands without importing them: from `COMMANDS`, which
    must say what each command says of itself."""
    ctx = click.Context(main)
    for name, entry in COMMANDS.items():
        command = main.get_command(ctx, name)
        assert command is not None, name
        assert command.get_short_help_str(limit=1000) == entry.short_help, name
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert f"  {name}" in result.output


def test_help_imports_no_command() -> None:
    """`firmament-py --help` loads none of numba, scipy, ZeroMQ or a command's module."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from firmament_py.cli import main\n"
        "assert CliRunner().invoke(main, ['--help']).exit_code == 0\n"
        "heavy = [m for m in ('numba', 'scipy', 'zmq', 'numpy', 'firmament_py.cli.simulate') "
        "if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_a_command_added_to_the_group_is_listed_and_runs() -> None:
    """`main.add_command` still works beside the lazily imported commands."""

    @click.command()
    def hello() -> None:
        """Say hello."""
        click.echo("hello")

    main.add_command(hello)
    try:
        listed = CliRunner().invoke(main, ["--help"])
        assert "hello" in listed.output and "Say hello." in listed.output
        assert CliRunner().invoke(main, ["hello"]).output == "hello\n"
    finally:
        main.commands.pop("hello")
