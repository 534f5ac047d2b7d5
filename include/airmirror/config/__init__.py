"""MM2-compatible configuration: properties parsing, config providers, flows and client settings.

``FlowConfig``, ``MirrorConfig`` and ``load_config`` are importable from here; they load
:mod:`airmirror.config.mirror_config` (and with it every module of the package, SQLAlchemy among them) on
first use, not on import.  A Spark copy task imports only the modules of this package it runs (the transform
chain, the registry settings): its worker process starts without the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airmirror.config.mirror_config import FlowConfig, MirrorConfig, load_config

__all__ = ["FlowConfig", "MirrorConfig", "load_config"]


def __getattr__(name: str) -> Any:
    """The package's exports, each taken from :mod:`airmirror.config.mirror_config` when first asked for."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("airmirror.config.mirror_config"), name)
    globals()[name] = value
    return value
