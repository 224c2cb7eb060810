"""Options a command shares or takes as a group.

:func:`with_threads` gives a command ``--threads N``; :func:`grouped` lets a command take a set
of related options as one frozen dataclass (typer sees each field as its own option; the
command's function receives one instance), which keeps every command under 10 parameters.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any

import typer


def with_threads(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command a ``--threads N`` option: torch's intra-op threads of the command and of
    each study worker (:func:`~distillscope.study.executors.set_threads`); 0 keeps the
    default (all cores; a study's pool: cores / workers each)."""
    option = typer.Option(0, "--threads", min=0, help="torch CPU threads (0: the default)")

    def threads_first(threads: int = 0) -> None:
        if threads:
            from distillscope.study.executors import set_threads

            set_threads(threads)

    return _adding(fn, {"threads": (int, option)}, lambda values: threads_first(**values), None)


def option(default: Any, *names: str, **kwargs: Any) -> Any:
    """A dataclass field that is a typer option: ``field: int = option(2, help=…)``."""
    return dataclasses.field(
        default=default, metadata={"option": typer.Option(default, *names, **kwargs)}
    )


def grouped(cls: type, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a command whose parameter ``name`` is a ``cls`` (a dataclass of :func:`option`
    fields): each field becomes an option of the command, gathered into one ``cls``."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: (hints[f.name], f.metadata["option"]) for f in dataclasses.fields(cls)}

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        return _adding(fn, fields, lambda values: cls(**values), name)

    return decorate


def _adding(
    fn: Callable[..., Any],
    options: dict[str, tuple[type, Any]],
    gather: Callable[[dict[str, Any]], Any],
    name: str | None,
) -> Callable[..., Any]:
    """``fn`` with ``options`` (name → (type, typer.Option)) added to its signature; the wrapper
    pops their values, calls ``gather`` on them and passes the result as ``name`` (when given)."""
    signature = inspect.signature(fn)
    kept = [p for p in signature.parameters.values() if p.name != name]
    added = [
        inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=kind)
        for key, (kind, opt) in options.items()
    ]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        gathered = gather({key: kwargs.pop(key) for key in options if key in kwargs})
        if name is not None:
            kwargs[name] = gathered
        return fn(*args, **kwargs)

    annotations = {k: v for k, v in typing.get_type_hints(fn).items() if k != name}
    wrapper.__signature__ = signature.replace(parameters=[*kept, *added])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {**annotations, **{k: kind for k, (kind, _) in options.items()}}
    return wrapper
