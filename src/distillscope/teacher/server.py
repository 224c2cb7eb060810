"""``distillscope serve-teacher``: a thin OpenAI-compatible server of a local model's log-probs.

It answers the subset of vLLM's API that a served teacher needs (:mod:`.client`), in vLLM's
JSON: ``POST /v1/completions`` with token-id prompts and ``prompt_logprobs`` (fp32
log-softmax of the model's logits over the tokenizer's vocabulary; ``max_tokens`` 1, the one
generated token the argmax), ``GET /v1/models``, ``POST /tokenize`` and ``GET /health``. Its
model card carries one field vLLM's lacks, ``tokenizer_sha256``: the fingerprint of the
tokenizer's token→id map (:func:`~distillscope.models.tokenizer_files.vocab_fingerprint`), which
a run's preflight compares with the student's tokenizer files before anything loads. It
listens on 127.0.0.1 unless told otherwise and stops cleanly on SIGTERM or Ctrl-C.

With an API key (``--api-key`` or :data:`API_KEY_ENV`, as vLLM's server takes ``--api-key`` or
``VLLM_API_KEY``) every route but ``/health`` answers only a request carrying
``Authorization: Bearer KEY``, compared in constant time (:func:`hmac.compare_digest`); any
other request is answered 401 before its body is read, and the connection closed. Listening
beyond loopback without a key is refused.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import torch

from distillscope.models.load import load_model
from distillscope.models.tokenizer_files import vocab_fingerprint
from distillscope.teacher.client import DEFAULT_KEY_ENV, FINGERPRINT_FIELD

#: The largest request body read (bytes): 64 MiB of JSON token ids.
MAX_BODY = 64 << 20
#: The environment variable ``serve-teacher`` reads its API key from, and a served teacher's
#: client sends when ``model.teacher_server.api_key_env`` names no other.
API_KEY_ENV = DEFAULT_KEY_ENV


class _BadRequest(Exception):
    """A request the server refuses with HTTP 400 (the message says why)."""


class LogprobModel:
    """A local model's prompt log-probs in vLLM's JSON shape (one forward at a time)."""

    def __init__(self, directory: Path, name: str, topk_max: int) -> None:
        self.model, self.tokenizer = load_model(directory)
        self.model.requires_grad_(False)
        self.name, self.topk_max = name, topk_max
        self.vocab_size = len(self.tokenizer)
        self.fingerprint = vocab_fingerprint(self.tokenizer.get_vocab())
        self.max_len = int(getattr(self.model.config, "max_position_embeddings", 0) or 0)
        self._lock = threading.Lock()

    def completions(self, body: dict) -> dict:
        """The answer to a ``/v1/completions`` request (``_BadRequest`` for what it refuses)."""
        rows, k = self._rows(body), body.get("prompt_logprobs")
        if not isinstance(k, int) or isinstance(k, bool) or k == 0 or k < -1:
            raise _BadRequest("prompt_logprobs must be a positive integer or -1 (the vocabulary)")
        k = self.vocab_size if k == -1 else k
        if k > self.topk_max:
            raise _BadRequest(f"prompt_logprobs={k} exceeds --topk-max {self.topk_max}")
        if body.get("max_tokens", 1) != 1 or body.get("stream"):
            raise _BadRequest("serve-teacher answers max_tokens=1 without streaming only")
        choices = []
        for i, row in enumerate(rows):
            entries, next_id = self._prompt_logprobs(row, k)
            choices.append(
                {
                    "index": i,
                    "text": self.tokenizer.decode([next_id]),
                    "logprobs": None,
                    "finish_reason": "length",
                    "stop_reason": None,
                    "prompt_logprobs": entries,
                }
            )
        tokens = sum(len(r) for r in rows)
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": choices,
            "usage": {
                "prompt_tokens": tokens,
                "completion_tokens": len(rows),
                "total_tokens": tokens + len(rows),
            },
        }

    def _rows(self, body: dict) -> list[list[int]]:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            prompt = [prompt]
        ok = isinstance(prompt, list) and prompt
        if not ok or not all(isinstance(r, list) and r for r in prompt):
            raise _BadRequest("prompt must be a list of token ids or a list of such lists")
        for row in prompt:
            if not all(isinstance(t, int) and not isinstance(t, bool) for t in row):
                raise _BadRequest("prompt token ids must be integers")
            if min(row) < 0 or max(row) >= self.vocab_size:
                raise _BadRequest(f"a prompt token id lies outside 0…{self.vocab_size - 1}")
            if self.max_len and len(row) > self.max_len:
                raise _BadRequest(f"a prompt of {len(row)} tokens exceeds {self.max_len}")
        return prompt

    def _prompt_logprobs(self, row: list[int], k: int) -> tuple[list, int]:
        """vLLM's ``prompt_logprobs`` of one row (None at position 0) and the argmax next id."""
        ids_1_S = torch.tensor([row])
        with self._lock, torch.inference_mode():
            logits_S_V = self.model(input_ids=ids_1_S).logits[0, :, : self.vocab_size]
            logp_S_V = torch.log_softmax(logits_S_V.float(), dim=-1)
        top_S_K = logp_S_V[:-1].topk(k, dim=-1)
        actual_S = logp_S_V[:-1].gather(-1, ids_1_S[0, 1:, None])[:, 0]
        ranks_S = (logp_S_V[:-1] > actual_S[:, None]).sum(-1) + 1
        entries: list[dict | None] = [None]
        for j, token in enumerate(row[1:]):
            entry = {str(token): self._logprob(token, actual_S[j], ranks_S[j])}
            pairs = zip(top_S_K.values[j], top_S_K.indices[j], strict=True)
            for rank, (lp, tid) in enumerate(pairs, 1):
                entry.setdefault(str(int(tid)), self._logprob(int(tid), lp, rank))
            entries.append(entry)
        return entries, int(logp_S_V[-1].argmax())

    def _logprob(self, token: int, logprob: torch.Tensor, rank: Any) -> dict:
        return {
            "logprob": float(logprob),
            "rank": int(rank),
            "decoded_token": self.tokenizer.decode([token]),
        }

    def tokenize(self, body: dict) -> dict:
        """The answer to ``/tokenize``: the tokenizer's ids of ``prompt``."""
        text = body.get("prompt")
        if not isinstance(text, str):
            raise _BadRequest("prompt must be a string")
        special = bool(body.get("add_special_tokens", True))
        tokens = self.tokenizer(text, add_special_tokens=special)["input_ids"]
        return {"count": len(tokens), "max_model_len": self.max_len, "tokens": tokens}

    def models(self) -> dict:
        """The answer to ``/v1/models``: this one model, its tokenizer's fingerprint beside."""
        card = {"id": self.name, "object": "model", "created": 0, "owned_by": "distillscope"}
        return {
            "object": "list",
            "data": [
                {
                    **card,
                    "root": self.name,
                    "max_model_len": self.max_len,
                    FINGERPRINT_FIELD: self.fingerprint,
                }
            ],
        }


def _handler(served: LogprobModel, api_key: str | None) -> type[BaseHTTPRequestHandler]:
    """The request handler class answering for ``served`` (``api_key``: the one it admits)."""
    expected = None if api_key is None else f"Bearer {api_key}".encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path == "/health":
                self._send(200, None)
            elif not self._admitted():
                return
            elif self.path == "/v1/models":
                self._send(200, served.models())
            else:
                self._send(404, _error(f"no route {self.path}", 404))

        def do_POST(self) -> None:  # noqa: N802
            if not self._admitted():
                return
            routes = {"/v1/completions": served.completions, "/tokenize": served.tokenize}
            if self.path not in routes:
                self._send(404, _error(f"no route {self.path}", 404))
                return
            try:
                self._send(200, routes[self.path](self._body()))
            except _BadRequest as err:
                self._send(400, _error(str(err), 400))

        def _admitted(self) -> bool:
            """Whether the request carries the key; if not, 401 and the connection closed
            (its body unread: nothing of it reaches the model)."""
            # http.server decodes header bytes as latin-1: encoding back gives the raw bytes
            given = (self.headers.get("Authorization") or "").encode("latin-1", "replace")
            if expected is None or hmac.compare_digest(given, expected):
                return True
            self.close_connection = True
            self._send(401, _error("a valid API key is required (Authorization: Bearer)", 401))
            return False

        def _body(self) -> dict:
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 < length <= MAX_BODY:
                raise _BadRequest(f"a request body of 1…{MAX_BODY} bytes is required")
            try:
                body = json.loads(self.rfile.read(length))
            except ValueError:
                raise _BadRequest("the request body is not JSON") from None
            if not isinstance(body, dict):
                raise _BadRequest("the request body must be a JSON object")
            return body

        def _send(self, code: int, payload: Any) -> None:
            data = b"" if payload is None else json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # quiet: a training run sends a request per micro-batch

    return Handler


def _error(message: str, code: int) -> dict:
    """vLLM's error body."""
    kind = {400: "BadRequestError", 401: "AuthenticationError"}.get(code, "NotFoundError")
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def make_server(
    directory: Path,
    host: str = "127.0.0.1",
    port: int = 8000,
    topk_max: int = 20,
    api_key: str | None = None,
) -> ThreadingHTTPServer:
    """A server of the model in ``directory`` bound to ``host:port`` (port 0: a free one),
    admitting only requests that carry ``api_key`` when one is given (an empty key is none);
    call ``serve_forever()`` and, from another thread, ``shutdown()``.

    ValueError, before the model loads: ``topk_max`` below 1, or a ``host`` beyond loopback
    without a key (anyone who reaches it could read the teacher)."""
    if topk_max < 1:
        raise ValueError(f"--topk-max must be at least 1, got {topk_max}")
    api_key = api_key or None
    if api_key is None and not is_loopback(host):
        raise ValueError(
            f"serve-teacher: listening on {host}, beyond this machine, needs an API key "
            f"(--api-key or {API_KEY_ENV})"
        )
    served = LogprobModel(directory, directory.name or str(directory), topk_max)
    try:
        return ThreadingHTTPServer((host, port), _handler(served, api_key))
    except OSError as err:
        raise ValueError(f"cannot listen on {host}:{port} ({err.strerror or err})") from None


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (127.0.0.0/8, ::1) or ``localhost``; a name or
    an unspecified address (0.0.0.0, ::) reaches beyond this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(server: ThreadingHTTPServer) -> None:
    """Serve until SIGTERM or Ctrl-C, then close the socket."""

    def stop(signum: int, frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopping", file=sys.stderr)
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.server_close()
