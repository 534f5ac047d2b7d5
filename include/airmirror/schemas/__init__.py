"""Schema registries: the framing that names a schema in a record, calls to a registry, and copying subjects."""
