"""Entry point: builds the typer app and runs it under the one error handler."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from roofline import __version__
from roofline.cli import (
    calibrate_cmd,
    engine_cmd,
    fits_cmd,
    formats_cmd,
    hw,
    models,
    plot_cmd,
    predict_cmd,
    runtimes_cmd,
    serve_cmd,
    sweep_cmd,
    validate_cmd,
)
from roofline.errors import RooflineError

app = typer.Typer(
    name="roofline",
    help="How fast, does it fit, and why: LLM inference on any hardware.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.add_typer(hw.app, name="hw", help="Hardware cards: list, show.")
app.add_typer(plot_cmd.app, name="plot", help="Pictures: roofline chart, concurrency sweep, memory budget.")
app.add_typer(engine_cmd.app, name="engine", help="The micro-engine: run card shapes for real, measured vs predicted.")
app.add_typer(runtimes_cmd.app, name="runtimes", help="Runtime profiles: list, show.")
app.add_typer(models.app, name="models", help="Model cards: list, show, import a transformers config.json.")
app.command("predict")(predict_cmd.predict_cmd)
app.command("fits")(fits_cmd.fits_cmd)
app.command("calibrate")(calibrate_cmd.calibrate_cmd)
app.command("validate")(validate_cmd.validate_cmd)
app.command("sweep")(sweep_cmd.sweep_cmd)
app.command("serve")(serve_cmd.serve_cmd)
app.command("capacity")(serve_cmd.capacity_cmd)
app.command("compare")(sweep_cmd.compare_cmd)
app.command("formats", help="Weight and KV-cache formats with effective bits per value.")(formats_cmd.formats)


def _version(value: bool):
    if value:
        typer.echo(f"roofline {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True,
                                                    help="Print the version and exit.")] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show the full traceback on errors.")] = False,
):
    """How fast, does it fit, and why: LLM inference on any hardware."""


def _one_line(text: str) -> str:
    from roofline.cli.output import plain

    return " ".join(plain(text).split())


def main(argv: list[str] | None = None) -> None:
    """Run the CLI. User errors (ours and the argument parser's): one line on stderr, exit 2, control characters
    removed. `--debug` anywhere shows the traceback."""
    try:  # typer >= 0.25 carries its own copy of click
        from typer._click import exceptions as click
    except ImportError:  # pragma: no cover - older typer
        from click import exceptions as click

    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    args = [a for a in args if a != "--debug"]
    try:
        code = app(args=args, prog_name="roofline", standalone_mode=False)
    except RooflineError as err:
        if debug:
            raise
        sys.stderr.write(f"error: {_one_line(str(err))}\n")
        sys.exit(2)
    except click.NoArgsIsHelpError as err:  # `roofline hw`: the group's help, as a user asked
        sys.stdout.write(err.ctx.get_help() + "\n")
        sys.exit(0)
    except click.UsageError as err:
        where = err.ctx.command_path if err.ctx is not None else "roofline"
        sys.stderr.write(f"error: {_one_line(err.format_message())} (see `{_one_line(where)} --help`)\n")
        sys.exit(2)
    except click.ClickException as err:
        sys.stderr.write(f"error: {_one_line(err.format_message())}\n")
        sys.exit(err.exit_code)
    except getattr(click, "Abort", KeyboardInterrupt):
        sys.stderr.write("aborted\n")
        sys.exit(130)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    except Exception as err:  # a bug: say so briefly, keep the traceback behind --debug
        if debug:
            raise
        sys.stderr.write(f"internal error: {type(err).__name__}: {_one_line(str(err))} (re-run with --debug for the "
                         "traceback)\n")
        sys.exit(1)
    if isinstance(code, int) and code:
        sys.exit(code)
