"""``distillscope serve-teacher``: a teacher's top-k prompt log-probs over HTTP (docs/scaling.md).

distillscope serve-teacher DIR --port 8000 [--host 0.0.0.0 --api-key …]
"""

from __future__ import annotations

import typer

from distillscope.cli.errors import friendly_errors
from distillscope.cli.output import err_console


@friendly_errors
def serve_teacher(
    directory: str = typer.Argument(..., help="a local HF model directory, or testbed:teacher"),
    port: int = typer.Option(8000, help="TCP port (0: a free one)"),
    host: str = typer.Option("127.0.0.1", help="address to listen on (another one is exposed)"),
    topk_max: int = typer.Option(20, "--topk-max", help="the largest prompt_logprobs answered"),
    threads: int = typer.Option(0, help="CPU threads of the forward (0: torch's default)"),
    api_key: str = typer.Option(
        "",
        "--api-key",
        envvar="DISTILLSCOPE_TEACHER_API_KEY",
        show_default=False,
        help="admit only requests with Authorization: Bearer KEY (prefer the env var)",
    ),
) -> None:
    """Serve DIRECTORY's prompt log-probs over vLLM's OpenAI API subset (docs/scaling.md)."""
    import torch

    from distillscope.models import check_model_dir, resolve_model_path
    from distillscope.teacher.server import is_loopback, make_server, serve

    root = check_model_dir(resolve_model_path(directory))
    if threads > 0:  # 1 beside a training run on the same CPU cores (docs/scaling.md)
        torch.set_num_threads(threads)
    if not is_loopback(host) and api_key:
        err_console.print(f"[yellow]warning:[/yellow] listening on {host}, beyond this machine")
    server = make_server(root, host, port, topk_max, api_key or None)
    print(f"serving {root} at http://{host}:{server.server_port}/v1 (Ctrl-C stops)", flush=True)
    serve(server)
