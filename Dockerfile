# airmirror's container image: Airflow (the version constraints.txt pins) with airmirror, its DAGs, a JRE
# and PySpark, so that the same image runs every Airflow component, the Spark standalone master and worker,
# and the demo's sample producer of docker-compose.yaml.
#
# airmirror is installed by scripts/install.sh, the install path `make setup` runs too, into its own venv
# (/opt/airmirror/venv, first on PATH): the `airflow` extra only, as a regular (non-editable) copy, without
# the Kafka jars of the local test clusters (AIRMIRROR_KAFKA_JARS=0). That venv holds Airflow as well, at
# the same pinned version as the base image, so `airflow`, `python`, `airmirror` and `spark-class` all
# resolve to it.
FROM apache/airflow:3.3.2-python3.11

USER root
# A JRE for PySpark (driver in the Airflow task, master and worker in their own containers). Debian slim
# images lack the man folder that the JRE's postinst links into.
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && apt-get autoremove -yqq --purge \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /opt/airmirror/src /opt/airmirror/deploy /opt/airflow/spark_apps /opt/airflow/auth \
    && chown -R airflow:0 /opt/airmirror /opt/airflow/spark_apps /opt/airflow/auth

USER airflow
WORKDIR /opt/airmirror/src
# Only what the install needs, so that editing DAGs or the deploy config does not re-run it.
COPY --chown=airflow:0 pyproject.toml constraints.txt README.md ./
COPY --chown=airflow:0 scripts/install.sh scripts/install.sh
COPY --chown=airflow:0 include/ include/
# PIP_USER=false: the base image may ask pip for --user installs, which a venv refuses.
RUN PIP_USER=false AIRMIRROR_EXTRAS=airflow AIRMIRROR_EDITABLE=0 AIRMIRROR_KAFKA_JARS=0 \
        scripts/install.sh /opt/airmirror/venv \
    && rm -rf build include/*.egg-info /tmp/.cache/pip

ENV VIRTUAL_ENV=/opt/airmirror/venv \
    PATH=/opt/airmirror/venv/bin:$PATH \
    PYSPARK_PYTHON=/opt/airmirror/venv/bin/python \
    AIRMIRROR_CONFIG=/opt/airmirror/deploy/mm2.properties

# The DAG file finds spark_apps/ next to its own folder (dags/../spark_apps). docker-compose.yaml mounts the
# checkout's dags/, spark_apps/ and deploy/ over these copies, so edits show without a rebuild.
COPY --chown=airflow:0 dags/ /opt/airflow/dags/
COPY --chown=airflow:0 spark_apps/ /opt/airflow/spark_apps/
COPY --chown=airflow:0 deploy/mm2.properties /opt/airmirror/deploy/mm2.properties

WORKDIR /opt/airflow
USER airflow
