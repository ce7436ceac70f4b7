"""`firmament-py render-docs`: render the results in Markdown write-ups anew from the committed
experiment CSVs they name (`firmament_py.sim.results_doc`), or check that they are current."""

from __future__ import annotations

from pathlib import Path

import click

from firmament_py.sim.results_doc import render, stale

__all__ = ["render_docs"]


@click.command(
    "render-docs",
    short_help="Render the results in Markdown write-ups from their committed CSVs.",
)
@click.argument("documents", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--check", is_flag=True, help="Change nothing; fail naming the documents out of date."
)
def render_docs(documents: tuple[Path, ...], check: bool) -> None:
    """Rewrite the rendered blocks of each DOCUMENT (default: every Markdown file under docs/)
    from the experiment CSVs they name, with the current verdict code."""
    paths = list(documents) or sorted(Path("docs").glob("*.md"))
    try:
        if check:
            out_of_date = stale(paths)
            if out_of_date:
                names = ", ".join(str(path) for path in out_of_date)
                raise click.ClickException(
                    f"out of date: {names} (run `firmament-py render-docs` to render them)"
                )
            click.echo(f"up to date: {len(paths)} documents")
            return
        for path in paths:
            text = render(path)
            if text != path.read_text(encoding="utf-8"):
                path.write_text(text, encoding="utf-8")
                click.echo(f"rendered {path}")
    except ValueError as error:
        raise click.ClickException(str(error)) from None
