"""A teacher served over HTTP scores exactly as the in-process top-k teacher does.

A real ``serve-teacher`` server of the shipped testbed teacher runs on 127.0.0.1 in a thread for
the module; a tiny fake server (malformed answers, HTTP errors, then the real server's answer)
checks the client's retries and its one-line errors.
"""

from __future__ import annotations

import json
import math
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch
from tests.numerics import approx_tols, logprob_tol, model_chain
from tests.train.conftest import random_rollouts, step_cfg, train_step
from tests.train.test_distill import strip_timings

from distillscope.config import ConfigError, load_run_config
from distillscope.models.load import load_model
from distillscope.models.locate import resolve_model_path
from distillscope.store import read_metrics, read_status
from distillscope.study.run_one import run_one
from distillscope.teacher.client import ServerError, TeacherClient
from distillscope.teacher.served import ServedTeacher
from distillscope.teacher.server import make_server
from distillscope.train.loop import distill

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)

V = 54  # the testbed vocabulary
SERVED = ["objective.teacher_topk=4", "objective.teacher_temperature=1.0"]


def _serve(server: ThreadingHTTPServer):
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


@pytest.fixture(scope="module")
def server_url():
    """The testbed teacher served on a free port of 127.0.0.1, stopped after the module."""
    server = make_server(resolve_model_path("testbed:teacher"), port=0, topk_max=V)
    thread = _serve(server)
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def testbed_models():
    """(student, teacher) as a run loads them (fp32, eval mode)."""
    student, _ = load_model(resolve_model_path("testbed:student"))
    teacher, _ = load_model(resolve_model_path("testbed:teacher"))
    return student, teacher.requires_grad_(False)


def _client(url: str, retries: int = 0) -> TeacherClient:
    return TeacherClient(url, vocab_size=V, timeout_s=10, retries=retries, backoff_s=0.0)


def _step(cfg, rollouts, student, teacher) -> tuple[dict, torch.Tensor]:
    """One step's metrics and the student's gradient (then cleared)."""
    metrics = train_step(cfg, rollouts, student, teacher, V)
    grad = torch.cat([p.grad.flatten() for p in student.parameters() if p.grad is not None])
    student.zero_grad(set_to_none=True)
    return metrics, grad


@pytest.mark.parametrize("k", [1, 4, 16])
def test_the_served_top_k_gives_the_in_process_loss(server_url, testbed_models, k):
    student, teacher = testbed_models
    rollouts = random_rollouts(6, V, seed=k, width=7)  # row 1: an empty completion
    over = {"objective.teacher_topk": k, "objective.teacher_temperature": 1.0}
    local, local_grad = _step(
        step_cfg(**over, **{"optim.grad_accum": 2}), rollouts, student, teacher
    )
    served_cfg = step_cfg(**over, **{"optim.grad_accum": 2, "model.teacher": server_url})
    served, grad = _step(served_cfg, rollouts, student, ServedTeacher(_client(server_url)))
    assert local.keys() == served.keys()
    # the served teacher scores each row alone, the local one the batch: other sum orders
    chain = model_chain(teacher.config, int(rollouts.completion_mask_B_T.sum()))
    for key in ("train/loss", "objective/teacher_topk_mass", "kl/k1"):
        assert served[key] == pytest.approx(local[key], **approx_tols(local[key], *chain)), key
    rel = approx_tols(1.0, *chain, *model_chain(student.config, 0))["rel"]  # and the student's
    assert float((grad - local_grad).norm()) <= rel * float(local_grad.norm())


def test_the_served_top_k_matches_the_teacher_logits(server_url, testbed_models):
    """Ids, folded log-probs and the completion's log-probs against a direct forward."""
    _, teacher = testbed_models
    rollouts = random_rollouts(3, V, seed=7, width=4)
    scores = ServedTeacher(_client(server_url)).topk(rollouts, 3, 1.0)
    for b in range(3):
        q = rollouts.teacher_prompt_ids_B_Q[b][rollouts.teacher_prompt_mask_B_Q[b] == 1]
        n = int(rollouts.lengths_B[b])
        row = torch.cat([q, rollouts.completion_B_T[b, :n]])
        with torch.no_grad():
            logp_S_V = torch.log_softmax(teacher(row[None]).logits[0, :, :V], dim=-1)
        for t in range(n):
            logp_V = logp_S_V[len(q) - 1 + t]
            ids = scores.ids_B_T_K[b, t]
            assert torch.equal(ids, logp_V.topk(3).indices)
            tail = logp_V.scatter(0, ids, -math.inf).logsumexp(0)
            expected = torch.cat([logp_V[ids], tail[None]])
            tol = logprob_tol(logp_V, teacher.config)  # the same forward, in fp32 twice
            assert torch.allclose(scores.folded_B_T_K1[b, t], expected, atol=tol, rtol=0)
            token = row[len(q) + t]
            assert scores.token_t1_B_T[b, t] == pytest.approx(float(logp_V[token]), abs=tol)
        assert (scores.token_t1_B_T[b, n:] == 0).all()


def _run_cfg(teacher: str, *extra: str):
    return load_run_config(
        None,
        [
            f"model.teacher={teacher}",
            "model.student=testbed:student",
            *SERVED,
            "optim.steps=2",
            "optim.lr=1e-3",
            "rollout.prompts_per_step=4",
            "task.max_new_tokens=8",
            "checkpoint_every=0",
            *extra,
        ],
    )


def assert_two_step_runs_match(teacher: str, out, reverse_kl_rel: float, *extra: str) -> None:
    """2-step runs with the testbed teacher and with ``teacher`` log the same metrics (1e-5
    relative; the folded reverse KL to ``reverse_kl_rel``)."""
    distill(_run_cfg("testbed:teacher", *extra), out / "local")
    distill(_run_cfg(teacher, *extra), out / "served")
    local, served = (strip_timings(read_metrics(out / d)) for d in ("local", "served"))
    assert [r["step"] for r in served] == [0, 1]
    for a, b in zip(local, served, strict=True):
        assert a.keys() == b.keys()
        for key, value in a.items():
            rel = reverse_kl_rel if key == "objective/reverse_kl" else 1e-5
            assert b[key] == pytest.approx(value, rel=rel, abs=1e-6), key


def test_a_two_step_onpd_run_with_a_served_teacher_matches_the_local_one(server_url, tmp_path):
    # the folded reverse KL weighs the teacher's tail, which a server's JSON gives only as
    # 1 − Σ top-k of fp32 log-probs (measured: 7e-5 relative at step 0)
    assert_two_step_runs_match(server_url, tmp_path, 2e-4)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_server_that_is_down_fails_in_one_line_before_anything_is_written(tmp_path):
    url = f"http://127.0.0.1:{_free_port()}/v1"
    cfg = _run_cfg(url, "model.teacher_server={retries: 1, backoff_s: 0.0}")
    with pytest.raises(ServerError) as err:
        distill(cfg, tmp_path / "run")
    message = str(err.value)
    assert message.startswith(f"model.teacher {url}: cannot reach the server")
    assert message.endswith("(after 2 attempts)") and "\n" not in message
    assert not (tmp_path / "run").exists()


def test_a_server_failing_mid_run_marks_the_run_failed_with_the_reason(fake_url, tmp_path):
    _Fake.plan = ["pass"] + ["http500"] * 10  # the tokenizer probe passes, every score fails
    cfg = _run_cfg(fake_url, "model.teacher_server={retries: 0}")
    with pytest.raises(ServerError):
        run_one(cfg, tmp_path / "run")
    status = read_status(tmp_path / "run")
    assert status["status"] == "failed"
    assert f"model.teacher {fake_url}: /completions answered HTTP 500" in status["reason"]
    assert read_metrics(tmp_path / "run") == []  # no step was logged


class _Fake(BaseHTTPRequestHandler):
    """Answers each POST with the next planned fault, then passes requests to the real server."""

    plan: list[str] = []
    real = ""
    posts = 0

    def do_GET(self):  # noqa: N802
        self._reply(200, json.dumps({"data": [{"id": "fake"}]}).encode())

    def do_POST(self):  # noqa: N802
        type(self).posts += 1
        body = self.rfile.read(int(self.headers["Content-Length"]))
        fault = type(self).plan.pop(0) if type(self).plan else "pass"
        if fault == "http500":
            self._reply(500, b'{"error": {"message": "engine crashed"}}')
            return
        if fault == "http400":
            self._reply(400, b'{"error": {"message": "prompt_logprobs too large"}}')
            return
        if fault == "json":
            self._reply(200, b'{"choices": [')
            return
        request = urllib.request.Request(
            self.real + self.path, body, {"Content-Type": "application/json"}
        )
        answer = json.loads(urllib.request.urlopen(request, timeout=10).read())
        self._reply(200, json.dumps(_mutate(answer, fault)).encode())

    def _reply(self, code: int, data: bytes):
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def _mutate(answer: dict, fault: str) -> dict:
    """The real answer with one planted fault (``pass``: unchanged)."""
    if fault == "tokens":
        return {"tokens": [t + 1 for t in answer["tokens"]]}
    entries = answer.get("choices", [{}])[0].get("prompt_logprobs")
    first = entries[1] if entries else None
    if fault == "short":
        entries.pop()
    elif fault == "nan":
        next(iter(first.values()))["logprob"] = math.nan
    elif fault == "vocab":
        first[str(V + 3)] = {"logprob": -30.0, "rank": 40}
    elif fault == "choices":
        answer["choices"] = []
    return answer


@pytest.fixture()
def fake_url(server_url):
    _Fake.plan, _Fake.real, _Fake.posts = [], server_url.removesuffix("/v1"), 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
    thread = _serve(server)
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


ROWS = [[1, 5, 6, 7, 8], [1, 9, 10]]


def test_malformed_answers_and_http_500_are_retried_until_one_holds(fake_url, server_url):
    _Fake.plan = ["json", "short", "http500", "nan"]
    got = _client(fake_url, retries=4).prompt_logprobs(ROWS, 4)
    assert got == _client(server_url).prompt_logprobs(ROWS, 4)
    assert _Fake.posts == 5


@pytest.mark.parametrize(
    "fault,cause",
    [
        ("json", "/completions answered malformed JSON"),
        ("short", "row 0: 4 prompt_logprobs entries for 5 tokens"),
        ("choices", "/completions answered 0 choices for 2 prompts"),
        ("nan", "row 0 position 1: log-prob nan of token"),
        ("vocab", f"row 0 position 1: token id {V + 3} is outside the vocabulary"),
        ("http500", "/completions answered HTTP 500: engine crashed"),
    ],
)
def test_what_is_still_wrong_after_the_last_retry_is_one_line(fake_url, fault, cause):
    _Fake.plan = [fault, fault]
    with pytest.raises(ServerError) as err:
        _client(fake_url, retries=1).prompt_logprobs(ROWS, 4)
    message = str(err.value)
    assert message.startswith(f"model.teacher {fake_url}: {cause}"), message
    assert message.endswith("(after 2 attempts)") and "\n" not in message
    assert _Fake.posts == 2


def test_an_http_4xx_is_not_retried(fake_url):
    _Fake.plan = ["http400"]
    with pytest.raises(ServerError, match="HTTP 400: prompt_logprobs too large$"):
        _client(fake_url, retries=3).prompt_logprobs(ROWS, 4)
    assert _Fake.posts == 1


def test_the_tokenizer_is_checked_through_the_server(fake_url, server_url):
    _, tokenizer = load_model(resolve_model_path("testbed:student"))
    _client(server_url).check_tokenizer(tokenizer)  # the testbed pair shares its tokenizer
    _Fake.plan = ["tokens"]
    with pytest.raises(ServerError, match="the server's tokenizer differs from model.student's"):
        _client(fake_url).check_tokenizer(tokenizer)


@pytest.mark.parametrize(
    "over,message",
    [
        (["objective.teacher_temperature=1.0"], "set objective.teacher_topk"),
        (["objective.teacher_topk=4"], "set objective.teacher_temperature=1.0"),
        ([*SERVED, "rollout.policy=teacher"], "rollout.policy=teacher needs the teacher"),
        ([*SERVED, "eval.profile_steps=[0]"], "eval.profile_steps needs a local teacher"),
        ([*SERVED, "model.teacher_dtype=bfloat16"], "model.teacher_dtype='bfloat16' is ignored"),
    ],
)
def test_what_a_served_teacher_cannot_do_is_refused_in_one_line(over, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_run_config(None, ["model.teacher=http://127.0.0.1:8000/v1", *over])
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "url,message",
    [
        ("http://user:secret@127.0.0.1:8000/v1", "must not carry credentials"),
        ("http://127.0.0.1:port/v1", "has a bad port"),
        ("https:///v1", "is not a server URL"),
        ("http://127.0.0.1:8000/v1?key=1", "is not a server URL"),
    ],
)
def test_a_bad_server_url_is_refused_without_echoing_credentials(url, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_run_config(None, [f"model.teacher={url}", *SERVED])
    assert "secret" not in str(err.value)


def test_connection_settings_need_a_served_teacher():
    with pytest.raises(ConfigError, match="ignored under a local model.teacher"):
        load_run_config(None, ["model.teacher_server={retries: 1}"])


@pytest.mark.slow  # a fresh interpreter imports torch and transformers
def test_serve_teacher_listens_on_loopback_and_stops_on_sigterm():
    port = _free_port()
    cmd = [sys.executable, "-m", "distillscope.cli", "serve-teacher", "testbed:teacher"]
    proc = subprocess.Popen(
        [*cmd, "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = proc.stdout.readline()  # printed once the socket listens
        assert f"at http://127.0.0.1:{port}/v1" in line, line + proc.stderr.read()
        health = urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10)
        assert health.status == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
