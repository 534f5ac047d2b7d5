"""Migrations you can verify: `airmirror verify` (record-by-record comparison of source and target) and
`airmirror takeover --from-mm2` (continue exactly where a stopped MirrorMaker 2 left off)."""
