"""Airflow plugins folder entry: the airmirror replication view (see :mod:`airmirror.ui.plugin`)."""

from airmirror.ui.plugin import AirmirrorPlugin

__all__ = ["AirmirrorPlugin"]
