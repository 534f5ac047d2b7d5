"""``make demo``: two local Kafka clusters, sample data, one replicated batch, and the flow's status."""
