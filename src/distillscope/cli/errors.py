"""How a command fails: every error one red line (exit 2 for the user's, 1 for an internal one).

``distillscope --debug COMMAND`` re-raises instead, with the full traceback.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import typer
from rich.markup import escape

from distillscope.cli.output import err_console

#: Errors a user can act on (bad config, missing or corrupt file, locked directory): exit 2.
USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError, PermissionError, KeyError)


class _Debug:
    """Whether ``--debug`` was given (set by the app's callback before any command runs)."""

    on = False


def set_debug(on: bool) -> None:
    """``--debug``: re-raise errors with their traceback instead of one line."""
    _Debug.on = on


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err.args[0] if err.args else err).split())
    return text if len(text) <= 500 else text[:499] + "…"


def is_user_error(err: BaseException) -> bool:
    """An error the user can act on: a bad input, a locked directory, or a missing optional
    extra whose message names its install command."""
    from distillscope.study.lock import StudyLockedError

    extra = isinstance(err, ImportError) and "pip install" in str(err)
    return extra or isinstance(err, (*USER_ERRORS, StudyLockedError))


def describe_error(err: BaseException) -> str:
    """An error's one line: a user error's own message, an internal one prefixed by its type."""
    return _one_line(err) if is_user_error(err) else f"{type(err).__name__}: {_one_line(err)}"


def friendly_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Every error of ``fn`` becomes one red line: exit 2 for user errors, 1 for internal ones;
    Ctrl-C exits 130 saying so."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except KeyboardInterrupt:
            if _Debug.on:
                raise
            err_console.print("[yellow]interrupted[/yellow] (Ctrl-C)", highlight=False)
            raise typer.Exit(130) from None
        except Exception as err:
            if _Debug.on:
                raise
            user = is_user_error(err)
            what = "error" if user else f"internal error ({type(err).__name__})"
            hint = "" if user else " — rerun with --debug for the traceback"
            # escaped: a message may hold brackets (an extra's name, a path) that rich would
            # read as markup and drop
            message = escape(_one_line(err))
            err_console.print(f"[red]{what}:[/red] {message}{hint}", highlight=False)
            raise typer.Exit(2 if user else 1) from None

    return wrapper
