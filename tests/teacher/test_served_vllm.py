"""The served-teacher client against vLLM's real OpenAI server, with the testbed teacher.

vLLM's ``api_server`` (fp32, eager, no log-prob limit) runs as a subprocess on a free port of
127.0.0.1 for the module, and stops on SIGTERM at the end. References: the in-process teacher
reduced to its top k (:meth:`LogitScores.topk`) and a 2-step run with the local teacher. The
server's tests are marked ``vllm`` (``make test-vllm`` runs them in ``.venv-vllm``); without
vLLM they are skipped with that reason. The last test, of the client alone, runs everywhere.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import torch
from tests.numerics import forward_logprob_tol, reorder_tol
from tests.rollout.test_vllm_engine import needs_vllm
from tests.teacher.test_served_teacher import V, _free_port, assert_two_step_runs_match
from tests.train.conftest import random_rollouts

from distillscope.models.load import load_model
from distillscope.models.locate import resolve_model_path
from distillscope.rollout.scoring import LogitScores, completion_logits
from distillscope.teacher.client import TeacherClient, _parse
from distillscope.teacher.served import ServedTeacher

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)

K = 16
#: Log-probs of one fp32 forward by two implementations (vLLM's CPU kernels, transformers'),
#: each off the exact value by up to ``forward_logprob_tol`` (tests/numerics.py): 2× that apart
#: (measured on an AVX2 EPYC: at most 1.1e-5 over three batches of 6 rows, k = 16). The tail bin
#: log(1 − Σ top-k) amplifies those differences where the tail is small (measured: 5e-3 apart at
#: a tail mass of 1e-5), so it is compared as a mass: Σ p_i · δ(log p_i) ≤ the log-prob's bound,
#: plus the rounding of the k-term sum (measured: at most 2.3e-7 apart).
#: How long the server may take to answer /health (measured: ~15 s idle, 130 s on 2 busy cores).
START_S = 400


def _server_cmd(port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(resolve_model_path("testbed:teacher")),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--max-logprobs",
        "-1",
        "--max-model-len",
        "128",
        "--enforce-eager",
        "--seed",
        "0",
    ]


def _healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(base + "/health", timeout=5) as answer:
            return answer.status == 200
    except OSError:
        return False


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL to the server's process group if it has not exited in 60 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def vllm_url(tmp_path_factory):
    """The testbed teacher behind vLLM's OpenAI server on 127.0.0.1, stopped after the module."""
    port = _free_port()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
    log: Path = tmp_path_factory.mktemp("vllm") / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            _server_cmd(port), stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_S
    try:
        while not _healthy(base):
            tail = log.read_text(errors="replace")[-2000:]
            assert proc.poll() is None, f"vLLM's server exited ({proc.returncode}):\n{tail}"
            assert time.monotonic() < deadline, f"no /health after {START_S} s:\n{tail}"
            time.sleep(1)
        yield base + "/v1"
    finally:
        _stop(proc)


@pytest.fixture(scope="module")
def teacher():
    model, tokenizer = load_model(resolve_model_path("testbed:teacher"))
    return model.requires_grad_(False), tokenizer


def _client(url: str) -> TeacherClient:
    return TeacherClient(url, vocab_size=V, timeout_s=60, retries=0)


@needs_vllm
def test_vllm_top_k_scores_equal_the_in_process_top_k_teacher(vllm_url, teacher):
    model, _ = teacher
    rollouts = random_rollouts(6, V, seed=3, width=7)  # row 1: an empty completion
    served = ServedTeacher(_client(vllm_url)).topk(rollouts, K, 1.0)
    with torch.no_grad():
        logits_B_T_V = completion_logits(model, rollouts, "teacher")
    local = LogitScores(logits_B_T_V, V).topk(K, rollouts, 1.0)
    mask_B_T = rollouts.completion_mask_B_T.bool()
    assert torch.equal(served.ids_B_T_K[mask_B_T], local.ids_B_T_K[mask_B_T])
    folded, want = served.folded_B_T_K1[mask_B_T], local.folded_B_T_K1[mask_B_T]
    atol = 2 * forward_logprob_tol(logits_B_T_V[mask_B_T], 1.0, model.config)
    tail_gap = float((folded[:, -1].exp() - want[:, -1].exp()).abs().max())
    assert tail_gap <= atol + reorder_tol(1.0, K), tail_gap
    pairs = {"top-k": (folded[:, :-1], want[:, :-1])}
    for name in ("token_loss_t_B_T", "token_t1_B_T"):
        pairs[name] = (getattr(served, name)[mask_B_T], getattr(local, name)[mask_B_T])
    for name, (got, expected) in pairs.items():
        gap = float((got - expected).abs().max())
        assert gap <= atol, (name, gap)


@needs_vllm
def test_the_tokenizer_probe_passes_against_vllm(vllm_url, teacher):
    _, tokenizer = teacher
    _client(vllm_url).check_tokenizer(tokenizer)


@needs_vllm
def test_a_two_step_onpd_run_with_vllm_as_teacher_matches_the_local_one(vllm_url, tmp_path):
    # measured: ≤ 1.1e-6 relative but the folded reverse KL, which weighs the teacher's tail bin
    # log(1 − Σ top-k) and so amplifies the kernels' 1e-5 differences: 3.1e-4
    over = (f"objective.teacher_topk={K}", "objective.teacher_temperature=1.0")
    assert_two_step_runs_match(vllm_url, tmp_path, 1e-3, *over)


def test_vllms_clamped_minus_infinity_reads_as_a_zero_probability():
    """vLLM answers a −inf prompt log-prob as −9999.0 (``clamp_prompt_logprobs``)."""
    probs = {"2": 0.75, "7": 0.25}
    entry = {t: {"logprob": math.log(p), "rank": r} for r, (t, p) in enumerate(probs.items(), 1)}
    entry["5"] = {"logprob": -9999.0, "rank": 54, "decoded_token": "2"}
    answer = {"choices": [{"prompt_logprobs": [None, entry]}]}
    (row,) = _parse(answer, [[1, 5]], 2, _client("http://127.0.0.1:1/v1"))
    assert row.ids == [[2, 7]] and row.token_logprobs == [-9999.0]
    assert row.tail(0) == pytest.approx(math.log(1e-7))  # the top 2 hold all the mass
