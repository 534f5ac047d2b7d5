"""A run that fails leaves its mark in the metadata DB, so that people on call see the flow failing.

:func:`failures_recorded` wraps a run (``airmirror replicate``, once or continuous, and each DAG task that holds
the flow).  Contract:

1. Whatever the block raises is re-raised unchanged, after the failure was recorded
   (:meth:`~airmirror.store.MetadataStore.record_run_failure`) with the error text the user sees.
2. A run that found the flow held by another run, or lost its lease to one, is not a failure of the flow: the
   other run is replicating it.  An interrupt (Ctrl-C, SIGTERM turned into KeyboardInterrupt) is not either.
3. A store that cannot record (the DB is down) never hides the run's own error: the recording's failure is
   logged and dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from airmirror.config import FlowConfig
from airmirror.config.secrets import masked_url_passwords
from airmirror.errors import AirmirrorError
from airmirror.model import RunFailure
from airmirror.store import FlowBusyError, MetadataStore

log = logging.getLogger(__name__)


def error_text(error: BaseException) -> str:
    """What a user is shown of ``error``: airmirror's own message, else the exception's type and message."""
    text = str(error) if isinstance(error, AirmirrorError) else f"{type(error).__name__}: {error}"
    return masked_url_passwords(text)


@contextmanager
def failures_recorded(flow: FlowConfig, store: MetadataStore) -> Iterator[None]:
    """Run the block, recording its failure by the module's rules."""
    try:
        yield
    except FlowBusyError:
        raise
    except Exception as error:
        try:
            store.record_run_failure(flow.name, RunFailure(datetime.now(UTC), error_text(error)))
        except Exception as unrecorded:
            log.warning("the failure of this run of %s could not be recorded: %s", flow.name, unrecorded)
        raise
