"""confluent-kafka clients of a local registry, as the demo, the bench and the tests use them (this module needs the
``dev`` extra: confluent-kafka's schema-registry client imports authlib).

* :func:`registry_client` times each call out after :data:`REGISTRY_TIMEOUT_S`: confluent-kafka's client has no
  timeout by default, and a call Apicurio never answered (seen under heavy load) would wait forever; a timed-out call
  is retried by the client (``max.retries``).
* :data:`TOPIC_SUBJECTS` names Confluent's TopicNameStrategy for serializers: by default they first ask the registry
  for associations, which Apicurio 3.3 does not have (one more request per schema, answered 404).
"""

from __future__ import annotations

from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient, topic_subject_name_strategy

REGISTRY_TIMEOUT_S = 10
TOPIC_SUBJECTS: dict[str, Any] = {"subject.name.strategy": topic_subject_name_strategy}


def registry_client(url: str) -> SchemaRegistryClient:
    """A client of the registry at ``url`` (Confluent's API) whose calls time out."""
    return SchemaRegistryClient({"url": url, "timeout": REGISTRY_TIMEOUT_S})
