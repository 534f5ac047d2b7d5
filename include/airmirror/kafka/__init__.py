"""Every call to a Kafka cluster: clients, retries, topics, offsets, groups, records, and the names airmirror owns."""
