"""Developer tools: local Kafka clusters, local Airflow and the demo.  Used by tests, the bench and make demo;
never imported by the product."""
