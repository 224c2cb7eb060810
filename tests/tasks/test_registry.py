"""``get_task``: an unknown name is one line listing every task, the dataset tasks included."""

import pytest

from distillscope.tasks.catalogue import TASKS, get_task
from distillscope.tasks.hub_tasks import DATASET_TASKS


def test_the_unknown_task_message_lists_every_task():
    with pytest.raises(ValueError) as err:
        get_task("medreasn")
    message = str(err.value)
    assert message.startswith("unknown task 'medreasn' (did you mean 'medreason'?); choose one of ")
    assert "\n" not in message
    for name in [*TASKS, *DATASET_TASKS]:
        assert name in message
    assert {"medreason", "mcq", "math", "sciknoweval", "numina-math", "countdown-hub"} <= set(
        DATASET_TASKS
    )


def test_a_name_close_to_none_gets_no_guess():
    with pytest.raises(ValueError, match=r"^unknown task 'zzzz'; choose one of "):
        get_task("zzzz")
