"""OpenLineage of a flow's runs: the source topics a run read are its inputs, the remote topics it wrote its
outputs.

Contract: ``record_batch`` reports, for every remote topic of the run's :data:`~airmirror.dag_factory.assets.Copied`
map that received records, the source topic as an input asset and the remote topic as an output asset to
Airflow's hook-lineage collector.  The OpenLineage provider turns them into the task's dataset list through the
Kafka provider's converter: namespace ``kafka://{first bootstrap host:port}``, name the topic.  A run that
copied nothing reports nothing.  Without a lineage reader (no OpenLineage provider, or one not configured) the
collector ignores the reports.
"""

from __future__ import annotations

from airflow.sdk import BaseHook
from airflow.sdk.lineage import get_hook_lineage_collector

from airmirror.dag_factory.assets import Copied


class FlowCopy(BaseHook):
    """The lineage context of the records one run of flow ``flow_name`` copied (no connection of its own)."""

    def __init__(self, flow_name: str) -> None:
        super().__init__()
        self.flow_name = flow_name

    def get_conn(self) -> None:
        """A copy has no client of its own: the clients are the flow's (its config's clusters)."""


def report_lineage(flow_name: str, copied: Copied) -> None:
    """Report each source -> remote topic pair of ``copied`` that received records (the module contract)."""
    collector = get_hook_lineage_collector()
    context = FlowCopy(flow_name)
    for remote_uri, topic in sorted(copied.items()):
        if topic.records:
            collector.add_input_asset(context, uri=topic.source)
            collector.add_output_asset(context, uri=remote_uri)
