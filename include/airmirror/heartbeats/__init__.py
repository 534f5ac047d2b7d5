"""MM2 heartbeats: emission to the target and replication latency observed from copied heartbeats."""
