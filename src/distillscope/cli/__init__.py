"""The ``distillscope`` command line: one module per command (docs/architecture.md)."""

from distillscope.cli.app import app, main

__all__ = ["app", "main"]
