"""The `firmament-py` command line: one group whose commands live beside the code they drive
and are imported only when they run.

The commands pull in numba, scipy, ZeroMQ and Dask, seconds of imports; `firmament-py --help`
and a mistyped command need none of them. `COMMANDS` lists each command's module and its short
help (a test holds the short help to the command's own), so the group can list them all without
importing one.
"""

from __future__ import annotations

import importlib
from typing import Any, NamedTuple

import click

from firmament_py import __version__

__all__ = ["COMMANDS", "main"]


class LazyCommand(NamedTuple):
    """Where a command lives, and the line `firmament-py --help` shows for it."""

    module: str
    attribute: str
    short_help: str


COMMANDS: dict[str, LazyCommand] = {
    "experiment": LazyCommand(
        "firmament_py.cli.experiment",
        "experiment",
        "Rerun one of the papers' experiments; set its claims beside the paper's.",
    ),
    "graphgen": LazyCommand(
        "firmament_py.cli.dimacs",
        "graphgen",
        "Write a Firmament-shaped scheduling flow graph (and incremental rounds) as DIMACS.",
    ),
    "keys": LazyCommand(
        "firmament_py.service.cli", "keys", "Make CURVE keys for the daemon and its clients."
    ),
    "nomora": LazyCommand(
        "firmament_py.nomora.cli",
        "nomora",
        "NoMora: application performance functions of network latency, and their traces.",
    ),
    "policies": LazyCommand(
        "firmament_py.cli.policies",
        "policies",
        "List the installed scheduling policies (entry-point group firmament_py.policies).",
    ),
    "render-docs": LazyCommand(
        "firmament_py.cli.render_docs",
        "render_docs",
        "Render the results in Markdown write-ups from their committed CSVs.",
    ),
    "serve": LazyCommand(
        "firmament_py.service.cli",
        "serve",
        "Run the scheduling daemon (ZeroMQ + msgpack: docs/protocol.md).",
    ),
    "simulate": LazyCommand(
        "firmament_py.cli.simulate",
        "simulate",
        "Simulate a cluster under the real scheduler: CSVs, plots and a summary.",
    ),
    "solve": LazyCommand(
        "firmament_py.cli.dimacs",
        "solve",
        "Solve the min-cost flow problem(s) in SOURCE (a DIMACS file or '-' for stdin).",
    ),
    "sweep": LazyCommand(
        "firmament_py.cli.simulate",
        "sweep",
        "Run a grid of simulations in parallel on Dask; plot a metric.",
    ),
    "workflow": LazyCommand(
        "firmament_py.workflows.cli",
        "workflow",
        "Workflows with network tasks (INFOCOM'19): schedule a workflow file, generate one.",
    ),
    "zoe": LazyCommand(
        "firmament_py.zoe.cli",
        "zoe",
        "Zoe's flexible scheduling of analytic applications (core and elastic components).",
    ),
}


class _Commands(click.Group):
    """The commands, imported when one runs; a file or directory one of them cannot use
    (missing, not a directory, no permission, a read-only file system: an `OSError` that names
    a file) is an error message naming it and exit status 1, not a traceback; so is running out
    of memory (a count of 10^10 somewhere)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})  # and any added with `add_command`

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return super().get_command(ctx, cmd_name)
        command = getattr(importlib.import_module(entry.module), entry.attribute)
        assert isinstance(command, click.Command), entry
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, entry.short_help) for name, entry in COMMANDS.items()]
        rows += [(name, command.get_short_help_str()) for name, command in self.commands.items()]
        with formatter.section("Commands"):
            formatter.write_dl(sorted(rows))

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OSError as error:
            if error.filename is None:
                raise
            reason = error.strerror or str(error)
            raise click.ClickException(f"cannot use {error.filename}: {reason}") from error
        except MemoryError:
            raise click.ClickException(
                "out of memory: the options or the input ask for more than this machine holds"
            ) from None


@click.group(cls=_Commands)
@click.version_option(__version__, prog_name="firmament-py")
def main() -> None:
    """firmament-py: flow-based cluster scheduling.

    Start with `firmament-py simulate --help`; `COMMAND --help` describes each command."""
