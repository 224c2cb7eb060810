"""The split's identity is pinned: the shipped testbed was trained on one partition, so the
held-out side of every identity must stay where it was when the weights were built.

Disjointness alone cannot catch a re-keyed hash (train and eval stay disjoint, but evaluation
would then draw items the shipped models trained on). These tests pin known identities with
their side, the testbed's recorded evaluation sets, and fingerprints of the held-out partition
of whole Countdown spaces; and they replay the training streams that ``testbed.json`` records
against that pinned partition.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from pathlib import Path

import pytest

import distillscope
from distillscope.tasks import evaluation_problems, file_split, load_file_task, training_problems
from distillscope.tasks.catalogue import COUNTDOWN_3_HARD_TB, COUNTDOWN_3_TB
from distillscope.tasks.countdown import OPERATIONS, apply_op
from distillscope.tasks.split import countdown_identity, is_held_out, problem_identity
from distillscope.testbed.recipe import SOURCES, SharpenSpec
from distillscope.testbed.sharpen import round_problems

TESTBED_JSON = Path(distillscope.__file__).parent / "testbed" / "weights" / "testbed.json"

#: Countdown identities with their side (True: held out), as the shipped testbed was built.
GOLDEN_COUNTDOWN = {
    "countdown:1,2,3>5": True,
    "countdown:1,2,3>7": True,
    "countdown:1,3,5>1": True,
    "countdown:1,2,3>1": False,
    "countdown:1,2,3>6": False,
    "countdown:1,2,3>8": False,
}
#: File-task row ids with their side (``id:<row id>``, an int and its string alike).
GOLDEN_ROW_IDS = {"1": True, "2": True, "6": True, "3": False, "7": False, "q-006": True}
GOLDEN_ROW_IDS |= {"q-001": False, "q-008": True, "q-010": False}

#: The first items of the testbed's recorded evaluation sets (testbed.json "eval": seed 43),
#: and a fingerprint of all 200 prompts in order (sha256, first 16 hex digits).
EVAL_HEAD = ["cd 6,7,1 to 48:", "cd 3,1,2 to 7:", "cd 4,2,10 to 12:", "cd 1,3,7 to 10:"]
EVAL_FINGERPRINT = "e5b86e4aa6e0ca9f"
HARDER_HEAD = ["cd 7,7,20 to 91:", "cd 17,7,3 to 58:", "cd 9,17,3 to 60:"]
HARDER_FINGERPRINT = "8917ac5573d384c4"
#: The study's training pool of tb-countdown3 (``training_problems``) begins with these.
TRAIN_POOL_HEAD = ["cd 2,1,5 to 7:", "cd 1,1,2 to 4:", "cd 3,4,6 to 72:", "cd 10,5,1 to 60:"]

#: (operands, operand range, targets ≤ 100): problems in the space, held out, fingerprint of the
#: sorted held-out identities. 3 × 1..10 is tb-countdown3; 3 × 1..20 holds the wide pretraining
#: source and the harder variant; 4 × 1..10 is tb-countdown4.
PARTITIONS = {
    (3, 10): (2_915, 556, "aeea51e378d47e4c"),
    (3, 20): (16_292, 3_226, "632a5f90538afdd9"),
    (4, 10): (34_393, 6_929, "0cdb78d64b7e2c27"),
}


def _digest(lines) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def _reachable(pool: tuple[int, ...]) -> set[int]:
    """Every value a Countdown solution using all of ``pool`` can end on (valid steps only)."""
    if len(pool) == 1:
        return set(pool)
    out: set[int] = set()
    for i, j in itertools.permutations(range(len(pool)), 2):
        rest = tuple(v for k, v in enumerate(pool) if k not in (i, j))
        for op in OPERATIONS:
            r = apply_op(pool[i], op, pool[j])
            if r is not None:
                out |= _reachable((*rest, r))
    return out


def _space(n: int, top: int) -> list[str]:
    """The identities of every Countdown problem of ``n`` operands in 1..top, targets 1..100."""
    return [
        countdown_identity(nums, t)
        for nums in itertools.combinations_with_replacement(range(1, top + 1), n)
        for t in sorted(_reachable(nums))
        if 1 <= t <= 100
    ]


@pytest.fixture(scope="module")
def held_out_partition() -> set[str]:
    """The held-out identities of the spaces of ``PARTITIONS``, checked against their pins."""
    held: set[str] = set()
    for (n, top), (size, n_held, fingerprint) in PARTITIONS.items():
        space = _space(n, top)
        side = sorted(i for i in space if is_held_out(i))
        assert (len(space), len(side), _digest(side)) == (size, n_held, fingerprint), (n, top)
        held.update(side)
    return held


@pytest.mark.parametrize(("identity", "held"), sorted(GOLDEN_COUNTDOWN.items()))
def test_countdown_identities_keep_their_side(identity, held):
    assert is_held_out(identity) is held


def test_a_countdown_problem_has_its_pinned_identity_and_side():
    evals = evaluation_problems(COUNTDOWN_3_TB, 43, 200)
    assert problem_identity(evals[0]) == countdown_identity([1, 6, 7], 48) == "countdown:1,6,7>48"
    assert is_held_out(problem_identity(evals[0]))
    pool = training_problems(COUNTDOWN_3_TB)
    assert problem_identity(pool[0]) == "countdown:1,2,5>7" and not is_held_out("countdown:1,2,5>7")


def test_the_testbed_evaluation_sets_are_the_recorded_ones():
    recorded = json.loads(TESTBED_JSON.read_text())["eval"]
    assert (recorded["task"], recorded["seed"], recorded["items"]) == ("tb-countdown3", 43, 200)
    assert recorded["harder"]["task"] == "tb-countdown3-hard" and recorded["harder"]["seed"] == 43
    evals = [p.prompt for p in evaluation_problems(COUNTDOWN_3_TB, 43, 200)]
    assert evals[: len(EVAL_HEAD)] == EVAL_HEAD and _digest(evals) == EVAL_FINGERPRINT
    harder = [p.prompt for p in evaluation_problems(COUNTDOWN_3_HARD_TB, 43, 200)]
    assert harder[: len(HARDER_HEAD)] == HARDER_HEAD and _digest(harder) == HARDER_FINGERPRINT
    pool = [p.prompt for p in training_problems(COUNTDOWN_3_TB)]
    assert pool[: len(TRAIN_POOL_HEAD)] == TRAIN_POOL_HEAD


def test_file_task_rows_keep_their_side(tmp_path):
    ids = list(GOLDEN_ROW_IDS)
    rows = [
        {"id": int(i) if i.isdigit() else i, "question": f"Q {i}?", "options": ["a", "b"]}
        for i in ids
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({**r, "answer": "A"}) + "\n" for r in rows))
    train, held = file_split(load_file_task("mcq", path), 0.2)
    assert [str(p.meta["id"]) for p in held] == [i for i in ids if GOLDEN_ROW_IDS[i]]
    assert [str(p.meta["id"]) for p in train] == [i for i in ids if not GOLDEN_ROW_IDS[i]]


def test_file_task_rows_without_an_id_keep_their_side_by_text(tmp_path):
    path = tmp_path / "math.jsonl"
    rows = [{"problem": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(1, 13)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, held = file_split(load_file_task("math", path), 0.2)
    assert [problem_identity(p) for p in held] == ["text:what is 5 + 5?", "text:what is 12 + 12?"]


def _prompt_identity(prompt: str) -> str | None:
    """The Countdown identity of a pretraining prompt (``[alt ]cd 3,1,2 to 7:``), else None."""
    if "cd " not in prompt or " to " not in prompt:
        return None
    body = prompt.removeprefix("alt ").removeprefix("cd ").removesuffix(":")
    numbers, target = body.split(" to ")
    return countdown_identity(map(int, numbers.split(",")), int(target))


@pytest.mark.slow
def test_no_item_of_the_shipped_testbeds_training_streams_is_held_out(held_out_partition):
    """Replays the pretraining streams testbed.json records (seed, mixture, steps × batch, as
    ``testbed.build.train_model`` draws them) and every sharpening round's problems; none may
    lie in the pinned held-out partition. (The sharpening replay batches use the same drawers,
    in an order that depends on the teacher's verified answers, so they are not replayed.)"""
    shipped = json.loads(TESTBED_JSON.read_text())
    recipe, records = shipped["recipe"], shipped["records"]
    seen = 0
    for role in ("teacher", "student"):
        spec = recipe[f"{role}_train"]
        assert records[role]["steps"] == int(spec["steps"] * shipped["steps_scale"])
        rng = random.Random(spec["seed"])
        names = sorted(spec["mixture"])
        weights = [spec["mixture"][n] for n in names]
        for _ in range(records[role]["steps"]):
            for source in rng.choices(names, weights, k=spec["batch_size"]):
                ident = _prompt_identity(SOURCES[source](rng)[0])
                if ident is not None:
                    seen += 1
                    assert ident not in held_out_partition, (role, source, ident)
    sharpen = SharpenSpec(**recipe["teacher_sharpen"])
    for r in range(records["teacher"]["sharpen_rounds"]):
        for p in round_problems(sharpen, r):
            seen += 1
            assert problem_identity(p) not in held_out_partition, ("sharpen", r, p.prompt)
    assert seen > 300_000  # the Countdown share of 2 × 2000 × 128 examples, and the rounds'
