"""A served teacher with an API key admits only requests that carry it.

The testbed teacher is served on 127.0.0.1 with a key; requests without it or with a wrong one
are answered 401 before the model runs; the client sends the key from the environment, and a
run's files never hold it. Binding beyond loopback without a key is refused before the model
loads.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest
from typer.testing import CliRunner

from distillscope.cli import app
from distillscope.config import load_run_config
from distillscope.models.locate import resolve_model_path
from distillscope.teacher.client import ServerError, TeacherClient
from distillscope.teacher.server import API_KEY_ENV, LogprobModel, is_loopback, make_server
from distillscope.train.loop import distill

KEY = "sk-test-7f3a9c1e5b"  # a key no file may hold
V = 54  # the testbed vocabulary
BODY = {"model": "teacher", "prompt": [[1, 2, 3]], "max_tokens": 1, "prompt_logprobs": 2}


@pytest.fixture(scope="module")
def keyed():
    """``(url, calls)``: the testbed teacher served with KEY; ``calls`` counts the forwards."""
    calls = []
    server = make_server(resolve_model_path("testbed:teacher"), port=0, topk_max=V, api_key=KEY)
    original = LogprobModel.completions

    def counted(self, body):
        calls.append(1)
        return original(self, body)

    LogprobModel.completions = counted  # the handler looks it up on every request
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", calls
    LogprobModel.completions = original
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def _request(url: str, path: str, auth: str | None, body: dict | None = None) -> tuple[int, str]:
    headers = {"Content-Type": "application/json"}
    if auth is not None:
        headers["Authorization"] = auth
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data, headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.mark.parametrize(
    "auth", [None, "", f"Bearer {KEY}x", f"Bearer {KEY[:-1]}", KEY, f"Basic {KEY}", "Bearer é"]
)
def test_a_request_without_the_right_key_is_answered_401_and_serves_nothing(keyed, auth):
    url, calls = keyed
    before = len(calls)
    for path, body in (("/v1/completions", BODY), ("/tokenize", {"prompt": "ab"})):
        code, text = _request(url, path, auth, body)
        assert code == 401 and "choices" not in text and "tokens" not in text
    code, text = _request(url, "/v1/models", auth)
    assert code == 401 and "data" not in json.loads(text)
    assert len(calls) == before  # the model never ran
    assert _request(url, "/health", auth)[0] == 200  # liveness stays open, as vLLM's


def test_the_right_key_is_served(keyed):
    url, calls = keyed
    before = len(calls)
    code, text = _request(url, "/v1/completions", f"Bearer {KEY}", BODY)
    assert code == 200 and len(json.loads(text)["choices"][0]["prompt_logprobs"]) == 3
    client = TeacherClient(url + "/v1", vocab_size=V, timeout_s=10, retries=0, api_key=KEY)
    (row,) = client.prompt_logprobs([[1, 2, 3, 4]], 4)
    assert len(row.ids) == 3 and all(len(ids) == 4 for ids in row.ids)
    assert len(calls) == before + 2


def test_a_client_without_the_key_fails_in_one_line_naming_the_variable(keyed, monkeypatch):
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    url, _ = keyed
    client = TeacherClient(url + "/v1", vocab_size=V, timeout_s=10, retries=2, api_key="wrong")
    with pytest.raises(ServerError) as err:
        client.model_name()
    message = str(err.value)
    assert "HTTP 401" in message and API_KEY_ENV in message and "wrong" not in message
    assert "\n" not in message and "attempt" not in message  # a 401 is final, not retried


def test_the_client_reads_the_key_from_the_environment_and_no_file_holds_it(
    keyed, monkeypatch, tmp_path
):
    url, _ = keyed
    monkeypatch.setenv(API_KEY_ENV, KEY)
    cfg = load_run_config(
        None,
        [
            f"model.teacher={url}/v1",
            "objective.teacher_topk=4",
            "objective.teacher_temperature=1.0",
            "optim.steps=1",
            "rollout.prompts_per_step=2",
            "task.max_new_tokens=4",
            "checkpoint_every=0",
        ],
    )
    distill(cfg, tmp_path / "run")
    files = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert any(p.name == "config.yaml" for p in files)
    assert not [p for p in files if KEY.encode() in p.read_bytes()]
    assert KEY not in json.dumps(cfg.model_dump(mode="json"))


def test_another_named_variable_must_be_set(monkeypatch):
    monkeypatch.delenv("MY_TEACHER_KEY", raising=False)
    cfg = load_run_config(
        None,
        [
            "model.teacher=http://127.0.0.1:9/v1",
            "model.teacher_server={api_key_env: MY_TEACHER_KEY}",
            "objective.teacher_topk=4",
            "objective.teacher_temperature=1.0",
        ],
    )
    with pytest.raises(ServerError, match="^model.teacher_server.api_key_env: MY_TEACHER_KEY is"):
        TeacherClient.from_config(cfg.model, vocab_size=V)
    monkeypatch.setenv("MY_TEACHER_KEY", KEY)
    assert TeacherClient.from_config(cfg.model, vocab_size=V)._headers["Authorization"] == (
        f"Bearer {KEY}"
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.7", "example.org"])
def test_listening_beyond_loopback_without_a_key_is_refused_in_one_line(host, monkeypatch):
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    assert not is_loopback(host)
    result = CliRunner().invoke(app, ["serve-teacher", "testbed:teacher", "--host", host])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and f"listening on {host}" in lines[0] and API_KEY_ENV in lines[0]


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.0.1", "::1", "localhost"])
def test_loopback_addresses_are_loopback(host):
    assert is_loopback(host)


def test_the_command_reads_its_key_from_the_environment(monkeypatch):
    # 192.0.2.1 (TEST-NET-1) is no address of this machine: with the key read, the refusal is
    # the bind's, not the missing key's, and nothing listens
    monkeypatch.setenv(API_KEY_ENV, KEY)
    host = "192.0.2.1"
    result = CliRunner().invoke(app, ["serve-teacher", "testbed:teacher", "--host", host])
    assert result.exit_code == 2
    assert f"cannot listen on {host}:8000" in result.output and KEY not in result.output
