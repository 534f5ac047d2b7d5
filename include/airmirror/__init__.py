"""airmirror: MirrorMaker 2 compatible Kafka replication as Airflow-scheduled Spark micro-batches."""

__version__ = "0.1.0"
