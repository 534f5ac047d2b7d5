#!/usr/bin/env bash
# The one install path of airmirror, shared by `make setup` and container builds:
#   scripts/install.sh [VENV]          (default VENV: .venv in the repository root)
# Environment: AIRMIRROR_EXTRAS (default "airflow,dev"; "" for the core library only),
#              AIRMIRROR_EDITABLE (default 1; 0 installs a regular copy), PYTHON (default python3),
#              AIRMIRROR_KAFKA_JARS (default 1; 0 skips step 3, e.g. in the container image, which runs no local
#              Kafka cluster or registry and has no Maven).
#
# 1. creates VENV if needed and installs the package with its extras, pinned by constraints.txt;
# 2. works around a packaging quirk: apache-airflow-providers-apache-spark depends on pyspark-client (newest
#    4.2.0), whose files are the same `pyspark/` Python modules as pyspark's, so installing it overwrites
#    pyspark 4.3.0's Python side with 4.2.0's (pyspark.__version__ then says 4.2.0 while the 4.3.0 jars stay).
#    pip cannot express "pyspark instead of pyspark-client", so pyspark is re-installed without deps last;
# 3. downloads the jars of the local Kafka clusters the tests, the bench and the demo run, and Apicurio Registry for
#    the local schema registries (`airmirror local-registry`; needs java + mvn), unless AIRMIRROR_KAFKA_JARS=0.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${1:-$root/.venv}"
extras="${AIRMIRROR_EXTRAS-airflow,dev}"
cd "$root"

test -x "$venv/bin/python" || "${PYTHON:-python3}" -m venv "$venv"
py="$venv/bin/python"
pip=("$py" -m pip install -q -c "$root/constraints.txt")

"$py" -m pip install -q --upgrade pip
target="."
[ -n "$extras" ] && target=".[$extras]"
if [ "${AIRMIRROR_EDITABLE:-1}" = 1 ]; then
    "${pip[@]}" -e "$target"
else
    "${pip[@]}" "$target"
fi

if "$py" -m pip show -q pyspark-client >/dev/null 2>&1; then
    "${pip[@]}" --force-reinstall --no-deps pyspark
fi
"$py" - <<'PY'
from importlib.metadata import version
import pyspark
assert pyspark.__version__ == version("pyspark"), f"pyspark files are {pyspark.__version__}, not {version('pyspark')}"
PY

# the Spark driver starts in half the time from a class-data-sharing archive (airmirror.replication.spark.class_archive_build)
"$py" -m airmirror.replication.spark.class_archive_build || echo "warning: no Spark class archive built; Spark sessions start without it" >&2

if [ "${AIRMIRROR_KAFKA_JARS:-1}" = 1 ]; then
    "$py" -c "from airmirror.devtools.local_kafka.jars import kafka_classpath; kafka_classpath()"
    # local Kafka nodes start on about half the CPU from a class archive (airmirror.devtools.local_kafka.class_archive)
    "$py" -m airmirror.devtools.local_kafka.class_archive_build ||
        echo "warning: no Kafka class archive built; local Kafka nodes start without it" >&2
    "$py" -c "from airmirror.devtools.local_registry import install; install()"
fi
