"""A teacher served over HTTP: the client of an OpenAI-compatible server's prompt log-probs.

The request is vLLM's extension of ``POST /v1/completions``: ``prompt`` a list of token-id lists
(prompt ⧺ completion, one per row), ``max_tokens: 1`` and ``prompt_logprobs: k``. The answer's
``choices[i].prompt_logprobs`` holds one entry per token of row i: ``null`` at position 0, then a
dict ``"token id" → {"logprob", "rank", "decoded_token"}`` with the k most likely tokens and the
actual token besides (vLLM's JSON; ``distillscope serve-teacher`` answers the same subset).
Log-probs are at temperature 1 (vLLM's prompt log-probs are the raw model's); vLLM answers a
−inf log-prob as −9999.0, read as it stands: a probability of 0.

Every request is retried with exponential backoff (``model.teacher_server``: ``timeout_s``,
``retries``, ``backoff_s``) when the server cannot be reached, times out, answers 5xx or 429, or
answers data that does not hold together (missing positions, a wrong length, non-finite values,
token ids outside the vocabulary); an HTTP 4xx is final. What is still wrong after the last try
raises :class:`ServerError`, one line naming ``model.teacher`` and the URL. Torch-free, so that a
run's preflight can reach the server before anything is written.
"""

from __future__ import annotations

import json
import math
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distillscope.models.tokenizer_files import (
    mismatch_message,
    tokenizer_codec,
    tokenizer_vocab,
    vocab_fingerprint,
)

#: The least tail mass a folded teacher keeps: 1 − Σ top-k of fp32 log-probs is known only to
#: ~1e-6 (a log-prob near 0 is x − logsumexp(x) rounded in fp32).
TAIL_FLOOR = 1e-7
#: Σ top-k probabilities above 1 + this is not a distribution (fp32 rounding stays far below).
MASS_SLACK = 1e-4
#: Characters of a server's error text kept in a message.
_SHOWN = 160
#: The model-card field in which ``serve-teacher`` shows its tokenizer's fingerprint.
FINGERPRINT_FIELD = "tokenizer_sha256"
#: Why a server without a fingerprint is refused.
_PROBE_DIFFERS = "its /tokenize of a probe text gives other ids"


class ServerError(ValueError):
    """A served teacher failed; the message names ``model.teacher``, the URL and the cause."""


class _Retry(Exception):
    """A failure worth another try: unreachable, timed out, 5xx/429, malformed data."""


class _Final(Exception):
    """A failure no retry mends: the server refused the request (HTTP 4xx)."""


@dataclass(frozen=True)
class RowTopK:
    """One row's scores at positions 1…n−1 (position j predicts token j), n the row's length.

    ``ids`` and ``logprobs``: the k most likely tokens of each position, most likely first;
    ``token_logprobs``: the log-prob of the row's actual token there; all at temperature 1.
    """

    ids: list[list[int]]
    logprobs: list[list[float]]
    token_logprobs: list[float]

    def tail(self, position: int) -> float:
        """log(1 − Σ top-k) at ``position`` (index into the lists), at least log TAIL_FLOOR."""
        mass = math.fsum(math.exp(lp) for lp in self.logprobs[position])
        return math.log(max(1.0 - mass, TAIL_FLOOR))


class TeacherClient:
    """The teacher behind ``url`` (``…/v1``): its model name, tokenizer probe and top-k scores.

    ``vocab_size``: the student's vocabulary; an id at or above it is malformed data.
    """

    def __init__(
        self,
        url: str,
        *,
        vocab_size: int,
        timeout_s: float = 60.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        api_key: str | None = None,
        key_env: str = "",
    ) -> None:
        self.url = url.rstrip("/")
        self.key_env = key_env or DEFAULT_KEY_ENV  # the variable named in errors, never the key
        self.vocab_size, self.timeout_s = vocab_size, timeout_s
        self.retries, self.backoff_s = retries, backoff_s
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._model_card: dict | None = None

    @classmethod
    def from_config(cls, model: Any, vocab_size: int) -> TeacherClient:
        """The client of a config's ``model`` section (a
        :class:`~distillscope.config.ModelConfig`)."""
        server = model.server()
        return cls(
            model.teacher,
            vocab_size=vocab_size,
            timeout_s=server.timeout_s,
            retries=server.retries,
            backoff_s=server.backoff_s,
            api_key=api_key(server.api_key_env),
            key_env=server.api_key_env or DEFAULT_KEY_ENV,
        )

    def model_name(self) -> str:
        """The served model's id (``GET /v1/models``: the first one), asked once."""
        return self._card()["id"]

    def tokenizer_fingerprint(self) -> str | None:
        """The served tokenizer's
        :func:`~distillscope.models.tokenizer_files.vocab_fingerprint`, shown in the model card by
        ``serve-teacher`` (:data:`FINGERPRINT_FIELD`); None from a server that shows none
        (vLLM), whose tokenizer is then probed through ``/tokenize``."""
        shown = self._card().get(FINGERPRINT_FIELD)
        return shown if isinstance(shown, str) else None

    def _card(self) -> dict:
        if self._model_card is None:
            self._model_card = self._call(lambda: _first_model(self._json("GET", "/models")))
        return self._model_card

    def tokenize(self, text: str) -> list[int]:
        """The server's token ids of ``text`` (vLLM's ``POST /tokenize``), no special tokens."""
        body = {"model": self.model_name(), "prompt": text, "add_special_tokens": False}
        return self._call(lambda: _tokens(self._json("POST", "/tokenize", body, root=True)))

    def check_tokenizer(self, tokenizer: Any) -> None:
        """ServerError unless the server's tokenizer is ``tokenizer`` (a loaded transformers
        tokenizer): the same vocabulary fingerprint, or, from a server that shows none, the same
        ids for a probe text (:meth:`_probe_agrees`)."""
        shown = self.tokenizer_fingerprint()
        if shown is not None:
            own = vocab_fingerprint(tokenizer.get_vocab())
            if own != shown:
                raise self._mismatch("model.student", f"vocabulary sha256 {shown:.12} vs {own:.12}")
            return

        def encode(text: str) -> list[int]:
            return tokenizer(text, add_special_tokens=False)["input_ids"]

        if not self._probe_agrees(tokenizer.decode, encode, self.vocab_size):
            raise self._mismatch("model.student", _PROBE_DIFFERS)

    def check_student_files(self, student: Path) -> None:
        """:meth:`check_tokenizer` against the tokenizer files of directory ``student``, read as
        :func:`~distillscope.models.tokenizer_files.tokenizer_vocab` reads them (torch-free from
        ``tokenizer.json``; confirmed as transformers loads it before refusing): the static check
        of a run's preflight, before any model loads."""
        shown, why = self.tokenizer_fingerprint(), _PROBE_DIFFERS
        for loaded in (False, True):
            if shown is not None:
                own = vocab_fingerprint(tokenizer_vocab(student, loaded))
                if own == shown:
                    return
                why = f"vocabulary sha256 {shown:.12} vs {own:.12}"
            elif self._probe_agrees(*tokenizer_codec(student, loaded)):
                return
        raise self._mismatch(str(student), why)

    def _probe_agrees(self, decode: Any, encode: Any, vocab_size: int) -> bool:
        """Whether the server tokenizes a probe text as ``encode`` does. The probe decodes the
        first and the last 512 ids of the vocabulary (specials included): a different
        vocabulary, merge table or added tokens gives other ids."""
        ids = [*range(min(vocab_size, 512)), *range(max(512, vocab_size - 512), vocab_size)]
        text = decode(ids)
        return self.tokenize(text) == list(encode(text))

    def _mismatch(self, student: str, why: str) -> ServerError:
        reason = f"the server's tokenizer differs from model.student's ({why})"
        name = f"model.teacher {self.url}"  # served: no cross-tokenizer opt-in (a local teacher)
        return ServerError(mismatch_message(name, student, reason, opt_in=False))

    def check_topk(self, k: int) -> None:
        """ServerError unless the server answers ``prompt_logprobs=k``: one two-token probe,
        asked before training (vLLM refuses k above its ``--max-logprobs``, ``serve-teacher``
        above its ``--topk-max``), so that a low limit is one line, not a failure at step 1."""
        body = {
            "model": self.model_name(),
            "prompt": [[0, 0]],
            "max_tokens": 1,
            "prompt_logprobs": k,
            "temperature": 1.0,
        }
        try:
            self._call(lambda: self._json("POST", "/completions", body))
        except ServerError as err:
            if "answered HTTP 4" not in str(err):  # unreachable, 5xx: not a refusal of k
                raise
            raise ServerError(
                f"{err}; objective.teacher_topk={k} needs a server that answers {k} log-probs "
                f"per position: restart it with --topk-max {k} (vLLM: --max-logprobs {k}) or "
                "lower objective.teacher_topk"
            ) from None

    def prompt_logprobs(self, rows: list[list[int]], k: int) -> list[RowTopK]:
        """The top-``k`` log-probs of every position of every row, one request for all rows."""
        body = {
            "model": self.model_name(),
            "prompt": rows,
            "max_tokens": 1,
            "prompt_logprobs": k,
            "temperature": 1.0,
        }
        return self._call(lambda: _parse(self._json("POST", "/completions", body), rows, k, self))

    def _json(self, method: str, path: str, body: Any = None, root: bool = False) -> Any:
        """One request's decoded JSON (``root``: a path beside ``/v1``, not under it)."""
        base = self.url.removesuffix("/v1") if root else self.url
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(base + path, data, self._headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                raw = response.read()
        except urllib.error.HTTPError as err:
            cause = f"{path} answered HTTP {err.code}: {_error_text(err)}{self._hint(err.code)}"
            raise (_Retry if err.code >= 500 or err.code == 429 else _Final)(cause) from None
        except (urllib.error.URLError, OSError) as err:  # refused, unresolvable, timed out
            reason = getattr(err, "reason", err)
            raise _Retry(f"cannot reach the server ({_short(str(reason))})") from None
        try:
            return json.loads(raw)
        except ValueError:
            raise _Retry(f"{path} answered malformed JSON") from None

    def _hint(self, code: int) -> str:
        """What an HTTP error most likely means for this client: a key missing or refused (by
        its variable's name, never the key), a URL without the API's ``/v1``."""
        if code in (401, 403):
            if "Authorization" not in self._headers:
                return (
                    f" (no API key sent: set {self.key_env}, or name the variable holding it "
                    "in model.teacher_server.api_key_env)"
                )
            return (
                f" (the server refused the key in {self.key_env}: is it the key the server "
                "was started with?)"
            )
        if code == 404 and not self.url.endswith("/v1"):
            return f" (the OpenAI API is served under /v1: try {self.url}/v1)"
        return ""

    def _call(self, attempt: Any) -> Any:
        """``attempt()``, retried with exponential backoff; ServerError after the last try."""
        for n in range(self.retries + 1):
            try:
                return attempt()
            except _Final as err:
                raise ServerError(f"model.teacher {self.url}: {err}") from None
            except _Retry as err:
                last = err
                if n < self.retries:
                    time.sleep(self.backoff_s * 2**n)
        tries = f"{self.retries + 1} attempt{'s' if self.retries else ''}"
        raise ServerError(f"model.teacher {self.url}: {last} (after {tries})")


#: The variable a served teacher's key is read from when ``api_key_env`` names none: the one
#: ``serve-teacher`` reads (:data:`distillscope.teacher.server.API_KEY_ENV`).
DEFAULT_KEY_ENV = "DISTILLSCOPE_TEACHER_API_KEY"


def api_key(env: str | None) -> str | None:
    """The key a client sends (``Authorization: Bearer``): the variable ``env`` names (which
    must be set), else :data:`DEFAULT_KEY_ENV` when set, else None. Only the variable's name is
    ever in a config; the key itself stays in the environment, out of every dump."""
    if env is None:
        return os.environ.get(DEFAULT_KEY_ENV) or None
    key = os.environ.get(env)
    if not key:
        raise ServerError(f"model.teacher_server.api_key_env: {env} is not set")
    return key


def _first_model(answer: Any) -> dict:
    """The first model card of a ``/models`` answer, its ``id`` a string."""
    try:
        card = answer["data"][0]
        name = card["id"]
    except (KeyError, IndexError, TypeError):
        raise _Retry("/models answered no model (expected data[0].id)") from None
    if not isinstance(name, str):
        raise _Retry("/models answered a model id that is not a string")
    return card


def _tokens(answer: Any) -> list[int]:
    tokens = answer.get("tokens") if isinstance(answer, dict) else None
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        raise _Retry("/tokenize answered no token list (expected tokens)")
    return tokens


def _parse(answer: Any, rows: list[list[int]], k: int, client: TeacherClient) -> list[RowTopK]:
    """Each row's :class:`RowTopK` from a completions answer, or _Retry naming what is wrong."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or len(choices) != len(rows):
        got = len(choices) if isinstance(choices, list) else "no"
        raise _Retry(f"/completions answered {got} choices for {len(rows)} prompts")
    out = []
    for b, (choice, row) in enumerate(zip(choices, rows, strict=True)):
        entries = choice.get("prompt_logprobs") if isinstance(choice, dict) else None
        if not isinstance(entries, list) or len(entries) != len(row):
            got = len(entries) if isinstance(entries, list) else "no"
            raise _Retry(f"row {b}: {got} prompt_logprobs entries for {len(row)} tokens")
        parsed = [_position(entries[j], row[j], k, client.vocab_size) for j in range(1, len(row))]
        bad = next(((j, why) for j, (why, *_) in enumerate(parsed, 1) if why), None)
        if bad is not None:
            raise _Retry(f"row {b} position {bad[0]}: {bad[1]}")
        out.append(RowTopK([p[1] for p in parsed], [p[2] for p in parsed], [p[3] for p in parsed]))
    return out


def _position(entry: Any, token: int, k: int, vocab_size: int) -> tuple:
    """``(problem or "", top ids, top log-probs, token log-prob)`` of one position's entry."""
    if not isinstance(entry, dict) or len(entry) < k:
        return (f"expected a dict of at least {k} log-probs",)
    scored = []
    for key, value in entry.items():
        lp = value.get("logprob") if isinstance(value, dict) else None
        if not (isinstance(key, str) and key.isdigit()) or not isinstance(lp, int | float):
            return ("an entry is not 'token id' → {logprob, rank}",)
        tid = int(key)
        if tid >= vocab_size:
            return (f"token id {tid} is outside the vocabulary ({vocab_size} tokens)",)
        if not math.isfinite(lp) or lp > MASS_SLACK:
            return (f"log-prob {lp} of token {tid} is not a finite log-probability",)
        rank = value.get("rank")
        scored.append((-float(lp), rank if isinstance(rank, int) else math.inf, tid))
    if str(token) not in entry:
        return (f"the actual token {token} has no log-prob",)
    top = sorted(scored)[:k]
    if math.fsum(math.exp(-s) for s, _, _ in top) > 1.0 + MASS_SLACK:
        return ("the top-k probabilities sum above 1",)
    return (
        "",
        [t for _, _, t in top],
        [-s for s, _, _ in top],
        float(entry[str(token)]["logprob"]),
    )


def _error_text(err: urllib.error.HTTPError) -> str:
    """The server's error message (vLLM: ``{"error": {"message"}}`` or ``{"message"}``)."""
    try:
        body = json.loads(err.read() or b"null")
    except ValueError:
        return _short(str(err.reason))
    if isinstance(body, dict):
        inner = body.get("error")
        message = inner.get("message") if isinstance(inner, dict) else body.get("message")
        if isinstance(message, str):
            return _short(message)
    return _short(str(err.reason))


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"
