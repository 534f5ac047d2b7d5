"""The Spark copy job: one task per planned range, exactly once with Kafka transactions and the batch log."""
