"""``distillscope config`` (every run-config field) and ``distillscope presets`` (the shipped
study presets, or one's YAML to copy).

distillscope config | grep device
distillscope presets [show NAME]
"""

from __future__ import annotations

import typer

from distillscope.cli.errors import friendly_errors
from distillscope.cli.output import console, print_table


@friendly_errors
def config() -> None:
    """List every run-config field: dotted name, type or allowed values, default, description."""
    from distillscope.config import config_fields

    # Plain lines, one per field, so that `distillscope config | grep device` works.
    print("# run config fields: YAML sections, or section.field=value overrides")
    for name, kind, default, description in config_fields():
        print(f"{name} ({kind}; default {default}): {description}")


@friendly_errors
def presets(
    action: str = typer.Argument(None, help="`show` to print a preset's YAML"),
    name: str = typer.Argument(None, help="with `show`: the preset"),
) -> None:
    """List the shipped study presets; `presets show NAME` prints one to copy and edit."""
    from distillscope.study.spec import list_presets, preset_path

    if action is None:
        title = "study presets (distillscope study --preset NAME [key=value …])"
        print_table(console, title, ("preset", "description"), list(list_presets().items()), wrap=1)
        return
    if action != "show" or name is None:
        raise ValueError("usage: distillscope presets [show NAME]")
    # print, not console.print: the YAML must come out byte for byte (no wrapping, no markup)
    print(preset_path(name).read_text(), end="")
