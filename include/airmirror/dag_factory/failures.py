"""Which task failures Airflow retries.

Rule: an :class:`~airmirror.errors.InputError` (a bad config key, param or connection: exit code 2 on the
command line) met while a task runs fails the task at once, without retries, because running it again
cannot fix it.  Everything else (transient Kafka and DB errors, a failed Spark job) propagates unchanged and
is retried per ``airmirror.task.retries``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from airflow.sdk.exceptions import AirflowFailException

from airmirror.errors import InputError

P = ParamSpec("P")
R = TypeVar("R")


def no_retry_on_bad_input(function: Callable[P, R]) -> Callable[P, R]:
    """``function`` with its InputErrors turned into AirflowFailException (same message)."""

    @functools.wraps(function)
    def task_body(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except InputError as error:
            raise AirflowFailException(str(error)) from error

    return task_body
