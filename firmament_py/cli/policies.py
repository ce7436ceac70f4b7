"""`firmament-py policies`: the scheduling policies installed, what each is, and whether it
loads."""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.table import Table

from firmament_py.sdk import PolicyError, available_policies, load_policy

__all__ = ["policies"]


@click.command()
def policies() -> None:
    """List the installed scheduling policies (entry-point group firmament_py.policies)."""
    table = Table(title="installed policies")
    for column in ("name", "preemption", "hooks", "about"):
        table.add_column(column)
    for name in available_policies():
        try:
            manager = load_policy(name)
        except PolicyError as error:
            table.add_row(name, "", "", f"[red]cannot load: {error.problem}[/red]")
            continue
        plugin = manager.plugin_manager.get_plugin(name)
        module = sys.modules.get(getattr(plugin, "__module__", ""), plugin)
        docstring = (getattr(module, "__doc__", None) or "").strip()
        about = " ".join(docstring.split("\n\n")[0].split())
        hooks = str(len(manager.implemented_hooks))
        table.add_row(name, "yes" if manager.preemption_enabled else "no", hooks, about)
    Console().print(table)
