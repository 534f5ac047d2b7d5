"""MM2's public contract, as Kafka's mirror-client has it: replication policies, topic filters, wire formats."""
