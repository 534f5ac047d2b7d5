"""The Arrow schema of the record batches a copy task reads from a range and writes to the target.

Columns mirror what a Kafka record carries, so a copy can be byte for byte: ``key``/``value`` are raw
bytes (null stays null), ``headers`` keeps order, duplicates and null values, and ``timestamp`` is the
source record's timestamp in epoch milliseconds (``timestamp_type``: 0 none, 1 CreateTime,
2 LogAppendTime).  ``offset`` is the source offset; it drives the offset-sync runs.
"""

from __future__ import annotations

import pyarrow as pa

HEADER_ARROW_TYPE = pa.list_(
    pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
)

RECORD_ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.int64()),
        pa.field("timestamp_type", pa.int32()),
        pa.field("headers", HEADER_ARROW_TYPE),
    ]
)
