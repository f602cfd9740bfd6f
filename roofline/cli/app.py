"""Entry point: builds the typer app and runs it under the one error handler."""

from __future__ import annotations

import errno
import os
import sys
import traceback
from typing import Annotated, Optional

import typer

from roofline import __version__
from roofline.cli.output import flush_held_warnings
from roofline.errors import RooflineError

# name -> (module under roofline.cli, attribute, kind, help): the app registers only the command being run (typer
# builds every registered command's signature at start-up, and each module imports its own layers), or all of them
# for help and for a name it does not know
COMMANDS = {
    "predict": ("predict_cmd", "predict_cmd", "command", None),
    "fits": ("fits_cmd", "fits_cmd", "command", None),
    "sweep": ("sweep_cmd", "sweep_cmd", "command", None),
    "compare": ("sweep_cmd", "compare_cmd", "command", None),
    "serve": ("serve_cmd", "serve_cmd", "command", None),
    "capacity": ("serve_cmd", "capacity_cmd", "command", None),
    "calibrate": ("calibrate_cmd", "calibrate_cmd", "command", None),
    "validate": ("validate_cmd", "validate_cmd", "command", None),
    "formats": ("formats_cmd", "formats", "command", "Weight and KV-cache formats with effective bits per value."),
    "hw": ("hw", "app", "group", "Hardware cards: list, show."),
    "models": ("models", "app", "group", "Model cards: list, show, import a config.json, GGUF or safetensors."),
    "runtimes": ("runtimes_cmd", "app", "group", "Runtime profiles: list, show."),
    "plot": ("plot_cmd", "app", "group", "Pictures: roofline chart, concurrency sweep, memory budget, serving."),
    "engine": ("engine_cmd", "app", "group", "The micro-engine: run card shapes for real, measured vs predicted."),
}


def build_app(only: str | None = None) -> typer.Typer:
    """The typer app with every command, or with `only` (a COMMANDS name) alone."""
    import importlib

    app = typer.Typer(name="roofline", help="How fast, does it fit, and why: LLM inference on any hardware.",
                      no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                      rich_markup_mode=None)
    app.callback()(_root)
    for name, (module, attr, kind, help_text) in COMMANDS.items():
        if only is not None and name != only:
            continue
        target = getattr(importlib.import_module(f"roofline.cli.{module}"), attr)
        if kind == "group":
            app.add_typer(target, name=name, help=help_text)
        else:
            app.command(name, help=help_text)(target)
    return app


def _version(value: bool):
    if value:
        typer.echo(f"roofline {__version__}")
        raise typer.Exit()


def _root(
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True,
                                                    help="Print the version and exit.")] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show the full traceback on errors.")] = False,
):
    """How fast, does it fit, and why: LLM inference on any hardware."""


# An error line quotes what it refuses; a pasted file or a 100,000-character argument is cut in its middle so the
# line stays readable (the messages written here run to a few hundred characters)
MAX_ERROR_CHARS = 600


def _one_line(text: str) -> str:
    from roofline.cli.output import plain

    line = " ".join(plain(text).split())
    if len(line) <= MAX_ERROR_CHARS:
        return line
    return f"{line[:MAX_ERROR_CHARS // 2]} [... {len(line) - MAX_ERROR_CHARS:,} characters ...] " \
           f"{line[-MAX_ERROR_CHARS // 2:]}"


def _command_path(args: list[str]) -> str:
    """'roofline hw list' from the words before the first option, where the parser kept no context (a missing
    option value): the command whose --help says what the option takes."""
    words = []
    for a in args:
        if a.startswith("-") or len(words) == 2 or (not words and a not in COMMANDS):
            break
        if words and COMMANDS[words[0]][2] != "group":
            break
        words.append(a)
    return " ".join(["roofline", *words])


def _user_error(message: str, debug: bool) -> None:
    """One line and exit 2 (with --debug, the traceback first: the exit code still says a user error)."""
    if debug:
        traceback.print_exc()
    sys.stderr.write(f"error: {_one_line(message)}\n")
    sys.exit(2)


def _internal_error(err: Exception, debug: bool) -> None:
    """A bug: one line and exit 1, the traceback behind --debug."""
    if debug:
        raise err
    sys.stderr.write(f"internal error: {type(err).__name__}: {_one_line(str(err))} (re-run with --debug for the "
                     "traceback)\n")
    sys.exit(1)


def _refused_by_the_system(err: Exception, debug: bool) -> None:
    """A path or an output the OS refuses, as one line naming it and what to do; anything else of these types is a
    bug (pathlib raises RuntimeError for a loop of links, other RuntimeErrors are ours)."""
    if isinstance(err, PermissionError):  # a path the user named that the OS will not let us read or write
        _user_error(f"{err.filename or 'a file'}: permission denied; check its permissions or choose another path",
                    debug)
    if isinstance(err, UnicodeEncodeError):  # a terminal whose encoding cannot show the tables' characters
        _user_error(f"the output's characters cannot be written in {sys.stdout.encoding}; set PYTHONIOENCODING=utf-8 "
                    "(or a UTF-8 locale) or use --json", debug)
    if isinstance(err, RuntimeError) and str(err).startswith("Symlink loop"):
        _user_error(f"{_short(str(err).split(' from ', 1)[-1])}: a loop of symbolic links; choose another path", debug)
    if isinstance(err, OSError) and err.filename is not None:  # a name over 255 bytes, a missing folder: the path
        _user_error(f"{_short(str(err.filename))}: {(err.strerror or 'unusable').lower()}; choose another path",
                    debug)
    if isinstance(err, OSError) and err.errno in OUTPUT_REFUSED:  # standard output on a full disk, /dev/full
        _user_error(f"cannot write the output: {err.strerror.lower()}; redirect it to a place with room", debug)
    _internal_error(err, debug)


OUTPUT_REFUSED = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO}  # a write's errors that are the disk's
INTERRUPTED = 130  # the shell's exit status for SIGINT (128 + 2)


def _short(text: str, most: int = 120) -> str:
    """`text` cut in the middle to at most `most` characters (a 5,000-character path in a one-line error)."""
    return text if len(text) <= most else f"{text[:most // 2]}...{text[-(most // 2 - 3):]}"


def main(argv: list[str] | None = None) -> None:
    """Run the CLI. User errors (ours and the argument parser's): one line on stderr, exit 2, control characters
    removed. `--debug` anywhere shows the traceback."""
    try:  # typer >= 0.25 carries its own copy of click
        from typer._click import exceptions as click
    except ImportError:  # pragma: no cover - older typer
        from click import exceptions as click

    flush_held_warnings(False)  # none left from an earlier run in this process
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    args = [a for a in args if a != "--debug"]
    first = next((a for a in args if not a.startswith("-")), None)
    try:
        app = build_app(first if first in COMMANDS else None)
        code = app(args=args, prog_name="roofline", standalone_mode=False)
        sys.stdout.flush()  # a full disk or closed pipe shows here, inside the handlers, not at exit
        flush_held_warnings(not code)
    except BrokenPipeError:  # `roofline ... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except RooflineError as err:
        _user_error(str(err), debug)
    except (OSError, UnicodeEncodeError, RuntimeError) as err:
        _refused_by_the_system(err, debug)
    except click.NoArgsIsHelpError as err:  # `roofline hw`: the group's help, as a user asked
        sys.stdout.write(err.ctx.get_help() + "\n")
        sys.exit(0)
    except click.UsageError as err:
        where = err.ctx.command_path if err.ctx is not None else _command_path(args)
        sys.stderr.write(f"error: {_one_line(err.format_message())} (see `{_one_line(where)} --help`)\n")
        sys.exit(2)
    except click.ClickException as err:
        sys.stderr.write(f"error: {_one_line(err.format_message())}\n")
        sys.exit(err.exit_code)
    except getattr(click, "Abort", KeyboardInterrupt):
        sys.stderr.write("aborted\n")
        sys.exit(INTERRUPTED)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(INTERRUPTED)
    except Exception as err:  # a bug: say so briefly, keep the traceback behind --debug
        _internal_error(err, debug)
    if code == INTERRUPTED:  # typer turns Ctrl-C into this exit code before our handlers see it
        sys.stderr.write("interrupted\n")
    if isinstance(code, int) and code:
        sys.exit(code)
