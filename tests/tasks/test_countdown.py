import random
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from distillscope.tasks.base import make_split, styled
from distillscope.tasks.catalogue import (
    COUNTDOWN_3,
    COUNTDOWN_3_TB,
    COUNTDOWN_4,
    COUNTDOWN_4E,
    get_task,
)
from distillscope.tasks.countdown import (
    PAPER_POOL,
    CountdownTask,
    format_steps,
    solutions,
    to_alt_style,
)
from distillscope.tasks.verify import (
    MAX_ANSWER_CHARS,
    MAX_TEXT_CHARS,
    answer_block,
    check_countdown,
    detect_style,
)

TASKS = [COUNTDOWN_3, COUNTDOWN_4, COUNTDOWN_4E, COUNTDOWN_3_TB]


def test_presets_follow_method_section_7():
    assert COUNTDOWN_3.n_operands == 3 and COUNTDOWN_3.pool == PAPER_POOL
    assert COUNTDOWN_4.n_operands == 4 and COUNTDOWN_4.max_target == 10_000
    assert COUNTDOWN_4E.n_operands == 4 and COUNTDOWN_4E.pool == tuple(range(1, 11))


def test_splits_are_deterministic_and_seed_dependent():
    a = make_split(COUNTDOWN_3, 42, 50)
    b = make_split(COUNTDOWN_3, 42, 50)
    c = make_split(COUNTDOWN_3, 43, 50)
    assert a == b
    assert a != c


def test_split_is_pinned():
    # Same seed → same problems on any machine (Mersenne Twister integer draws are portable).
    first = make_split(COUNTDOWN_3_TB, 43, 3)
    assert [p.prompt for p in first] == [p.prompt for p in make_split(COUNTDOWN_3_TB, 43, 3)]
    assert first[0].prompt.startswith("cd ") and first[0].prompt.endswith(":")


def test_every_generated_problem_is_solved_by_its_reference_and_in_range():
    rng = random.Random(0)
    for task in TASKS:
        for _ in range(200):
            p = task.sample(rng)
            nums, target = p.answer["numbers"], p.answer["target"]
            assert len(nums) == task.n_operands and all(n in task.pool for n in nums)
            assert target >= task.min_target
            assert task.max_target is None or target <= task.max_target
            assert task.score(p, p.meta["solution"]) == 1.0
            assert task.score(p, to_alt_style(p.meta["solution"])) == 1.0
            assert task.score(p, f"<think>ok</think><answer>{p.meta['solution']}</answer>") == 1.0


def test_exhaustive_solver_agrees_with_verifier():
    for sol in solutions([3, 5, 7], 56):
        assert check_countdown([3, 5, 7], 56, format_steps(sol))
    assert solutions([1, 1, 1], 100) == []


def test_verifier_examples():
    assert check_countdown([2, 3, 4], 20, "2+3=5,5*4=20")
    assert check_countdown([2, 3, 4], 20, "2p3>5;5x4>20")
    assert check_countdown([2, 3, 4], 20, "<answer> 2 + 3 = 5 , 5 * 4 = 20 </answer>")
    assert not check_countdown([2, 3, 4], 20, "2+3=6,6*4=24")  # wrong arithmetic
    assert not check_countdown([2, 3, 4], 5, "2+3=5")  # 4 unused
    assert not check_countdown([2, 3], 5, "2+3=5,5+5=10")  # 5 used twice
    assert not check_countdown([7, 2], 3, "7/2=3")  # inexact division
    assert not check_countdown([1, 2], 3, "")
    assert not check_countdown([1, 2], 3, "9**9**9")


def test_hostile_text_is_rejected_fast():
    for text in ["9" * 10_000 + "+1=1", "9**9**9", "(" * 5000, "1+1=2," * 1000]:
        t0 = time.perf_counter()
        assert not check_countdown([1, 1], 2, text)
        assert time.perf_counter() - t0 < 0.05  # generous: shared CI cores


def _reasoning(n_words: int, rng: random.Random) -> str:
    # A chat model's <think> trace: words, tried equations, numbers (about 1.3 tokens a word).
    words = ["try", "maybe", "then", "so", "we", "need", "the", "target", "is", "not", "3*5=15"]
    words += ["7+8=15", "56/7=8", "hmm", "subtract", "multiply", "8*7", "=", "<", ">", "56,", "x"]
    return " ".join(rng.choice(words) for _ in range(n_words))


def test_long_reasoning_before_the_answer_is_scored():
    # Issue 9 item 8: a ~1,000-token trace (~5,000 characters) before the answer block.
    think = f"<think>{_reasoning(1_000, random.Random(0))}</think>\n"
    assert 4_000 < len(think) < 8_000
    assert check_countdown([3, 5, 7], 56, think + "<answer>3+5=8,8*7=56</answer>")
    assert check_countdown([3, 5, 7], 56, think + "<answer>3p5>8;8x7>56</answer>")
    assert not check_countdown([3, 5, 7], 56, think + "<answer>3+5=8,8*7=57</answer>")
    assert not check_countdown([3, 5, 7], 56, think + "<answer>3+5=8</answer>")
    assert not check_countdown([3, 5, 7], 56, think + "3+5=8,8*7=56")  # bare list: over the bound
    assert detect_style(think + "<answer>3p5>8;8x7>56</answer>") == "alt"


def test_answer_and_text_bounds():
    ok = "<answer>3+5=8,8*7=56</answer>"
    assert check_countdown([3, 5, 7], 56, " " * (MAX_TEXT_CHARS - len(ok)) + ok)
    assert not check_countdown([3, 5, 7], 56, " " * (MAX_TEXT_CHARS - len(ok) + 1) + ok)
    padded = "<answer>" + " " * (MAX_ANSWER_CHARS - 5) + "3+5=8,8*7=56</answer>"
    assert not check_countdown([3, 5, 7], 56, padded)  # the block itself is over the bound
    assert not check_countdown([1, 1], 2, "<answer>1+1=2</answer>".replace("1", "1" * 13, 1))
    assert not check_countdown([3, 5, 7], 56, "<answer>٣+٥=٨,٨*٧=٥٦</answer>")  # ASCII digits only


def test_the_last_answer_block_counts():
    assert answer_block("no tags") is None
    assert answer_block("<answer>unclosed") is None
    assert answer_block("<answer>a</answer> then <answer>b</answer>") == "b"
    assert answer_block("<answer>a</answer><answer>unclosed") == "a"
    assert answer_block("<answer>a<answer>b</answer>") == "b"  # the innermost open tag
    assert answer_block("<answer>a</answer></answer>") == "a"
    assert not check_countdown([3, 5, 7], 56, "<answer>3+5=8,8*7=56</answer><answer>1</answer>")


def _best_time(fn, text: str, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(10):
            fn(text)
        best = min(best, time.perf_counter() - t0)
    return best


def test_detect_style_is_linear():
    # Issue 10 item 8: 80,000 characters of unclosed tags took 3.5 s (quadratic). Compare sizes
    # N and 8N: linear time gives a ratio near 8, quadratic near 64; the bound leaves CI slack.
    for chunk in ["<answer>", "<answer>1p2>3;", "1+2=3,", "</answer><answer>x>"]:
        small, large = chunk * (10_000 // len(chunk)), chunk * (80_000 // len(chunk))
        t_small, t_large = _best_time(detect_style, small), _best_time(detect_style, large)
        assert t_large < 24 * t_small + 1e-3, (chunk, t_small, t_large)
        assert detect_style(large) in ("plain", "alt", "mixed", "none")


def test_style_detector():
    assert detect_style("3+5=8,8*7=56") == "plain"
    assert detect_style("3p5>8;8x7>56") == "alt"
    assert detect_style("3+5=8;8x7>56") == "mixed"
    assert detect_style("hello") == "none"
    assert styled("cd 1,2 to 3:").startswith("alt ")


def test_get_task_names_the_choices():
    assert get_task("countdown3") is COUNTDOWN_3
    try:
        get_task("countdown9")
    except ValueError as err:
        assert "countdown3" in str(err)
    else:
        raise AssertionError("expected ValueError")


def test_chat_messages_carry_numbers_and_target():
    p = COUNTDOWN_3.sample(random.Random(1))
    msgs = COUNTDOWN_3.chat_messages(p)
    assert msgs[0]["content"] == "You are a careful arithmetic solver."
    assert f"Target: {p.answer['target']}" in msgs[1]["content"]


numbers_st = st.lists(st.integers(1, 30), min_size=2, max_size=4)


@settings(max_examples=300, deadline=None)
@given(numbers_st, st.integers(-50, 1000), st.text(max_size=200))
def test_verifier_never_raises_on_arbitrary_text(numbers, target, text):
    assert check_countdown(numbers, target, text) in (True, False)
    assert detect_style(text) in ("plain", "alt", "mixed", "none")


step_st = st.tuples(
    st.integers(-20, 200), st.sampled_from("+-*/"), st.integers(-20, 200), st.integers(-500, 5000)
)


@settings(max_examples=500, deadline=None)
@given(numbers_st, st.integers(1, 200), st.lists(step_st, min_size=1, max_size=4))
def test_verifier_never_accepts_a_wrong_solution(numbers, target, steps):
    text = format_steps(steps)
    if check_countdown(numbers, target, text):
        # Replay independently: every accepted solution must be genuinely valid.
        pool = list(numbers)
        for a, op, b, r in steps:
            pool.remove(a)
            pool.remove(b)
            if op == "/":
                assert b != 0 and a % b == 0 and a // b == r
            else:
                assert {"+": a + b, "-": a - b, "*": a * b}[op] == r
            pool.append(r)
        assert pool == [target]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(TASKS))
def test_verifier_accepts_every_generated_solution(seed, task):
    p = task.sample(random.Random(seed))
    assert task.score(p, p.meta["solution"]) == 1.0


def test_custom_task_validation():
    for bad in [
        dict(n_operands=1, pool=(1,)),
        dict(n_operands=3, pool=()),
        dict(n_operands=3, pool=(1, 2), operations=("^",)),
    ]:
        try:
            CountdownTask("x", **bad)
        except ValueError as err:
            assert "'x'" in str(err)
        else:
            raise AssertionError(bad)
