"""Which source topics a flow's checkpoints cover, and how their offsets reach the target.

A topic the flow replicates is translated forward, by this flow's offset-sync runs.  A topic that
originated on the target (``b.orders`` on ``a`` in flow ``a->b``) is failed back: the checkpoint names its
upstream topic on the target, translated backwards by the reverse flow's runs (see
:mod:`airmirror.checkpoints.translation`).  So is a topic the reverse flow's routers named (``RegexRouter``,
:mod:`airmirror.config.transforms` rule 7): its name says nothing of where it came from, so the reverse flow's
source topics are given (:func:`routed_back`).  Everything else has no route.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from airmirror.config.mirror_config import FlowConfig

NOTHING_ROUTED_BACK: Mapping[str, str] = {}


@dataclass(frozen=True)
class Route:
    """How a source topic's offsets reach the target.

    ``topic``: name on the flow's source; ``target_topic``: name on the target (the checkpoint's topic);
    ``runs_flow``/``runs_topic``: the flow whose runs translate it and the source topic those runs are keyed by;
    ``failback``: the runs are the reverse flow's and are read backwards.
    """

    topic: str
    target_topic: str
    runs_flow: str
    runs_topic: str
    failback: bool


def routed_back(reverse: FlowConfig, reverse_topics: Iterable[str]) -> dict[str, str]:
    """Of the source topics ``reverse_topics`` of flow ``reverse`` (a flow's reverse flow), those its routers
    renamed, by the name they have on the flow's source."""
    named = {topic: reverse.remote_topic(topic) for topic in reverse_topics}
    return {
        name: topic
        for topic, name in named.items()
        if name != reverse.policy.format_remote_topic(reverse.source, topic)
    }


def route(flow: FlowConfig, topic: str, routed: Mapping[str, str] = NOTHING_ROUTED_BACK) -> Route | None:
    """The route of ``topic``, ``None`` when the flow neither replicates it nor can fail it back.

    Failback topics are those whose source (per the replication policy) is the flow's target, that pass
    ``topics``/``topics.exclude`` (MM2's checkpoint topic filter) and are not internal, and those of ``routed``
    (:func:`routed_back`), which ``topics.exclude`` may leave out of the flow so that it does not copy them back.
    """
    if flow.should_replicate(topic):
        return Route(topic, flow.remote_topic(topic), flow.name, topic, failback=False)
    reverse = f"{flow.target}->{flow.source}"
    if topic in routed:
        return Route(topic, routed[topic], reverse, routed[topic], failback=True)
    policy = flow.policy
    upstream = policy.upstream_topic(topic)
    if (
        upstream is not None
        and policy.topic_source(topic) == flow.target
        and flow.topics.matches(topic)
        and not policy.is_internal_topic(topic)
    ):
        return Route(topic, upstream, reverse, upstream, failback=True)
    return None
