"""Package layering of airmirror, read from the source with ``ast`` (nothing is imported).

``LAYERS`` below is the one statement of the rules; ``docs/architecture.md`` shows the same table.
A package may import its own modules and any package of a lower layer, never a higher one.  Packages of the
same layer may not import each other, except where ``SAME_LAYER`` says so.  Every module under
``include/airmirror/`` must belong to a package of the table, so a new top-level package or module has to be
placed in it.  ``airmirror.devtools`` is the top layer: it may import anything, and nothing else imports it.
No module takes part in an import circle, however long, and whether the imports are at the top of a module, in a
function or only for type checking (:func:`import_circle`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

INCLUDE = Path(__file__).resolve().parents[2] / "include"
PACKAGE_ROOT = INCLUDE / "airmirror"
DEVTOOLS = "airmirror.devtools"

LAYERS: list[tuple[str, ...]] = [
    # 0: plain values, error types and the names airmirror gives what it owns; "airmirror" is the root
    # package itself (``__version__`` only)
    ("airmirror", "airmirror.errors", "airmirror.model", "airmirror.names"),
    # 1: MM2's public contract: replication policies, topic filters, wire formats
    ("airmirror.mm2",),
    # 2: MM2 properties -> validated flow settings | the failover client for applications (confluent-kafka and mm2 only)
    ("airmirror.config", "airmirror.client"),
    # 3: every call to a cluster | SQL persistence | every call to a schema registry (siblings: none imports another)
    ("airmirror.kafka", "airmirror.store", "airmirror.schemas"),
    # 4: the MM2 features built on clusters and the store
    ("airmirror.heartbeats", "airmirror.checkpoints", "airmirror.replication"),
    # 5: migrations built on replication: verify and takeover
    ("airmirror.migration",),
    # 6: the front ends (siblings)
    ("airmirror.cli", "airmirror.dag_factory", "airmirror.ui"),
    # 7: developer tools: may import anything, nothing imports them
    (DEVTOOLS,),
]

SAME_LAYER: dict[str, frozenset[str]] = {
    # step 4 of a batch stores the replication latency of the heartbeats it copied
    "airmirror.replication": frozenset({"airmirror.heartbeats"}),
}

RANK: dict[str, int] = {package: layer for layer, packages in enumerate(LAYERS) for package in packages}


def module_name(path: Path) -> str:
    parts = path.relative_to(INCLUDE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_modules(root: Path) -> dict[str, Path]:
    return {module_name(path): path for path in sorted(root.rglob("*.py"))}


MODULES = source_modules(PACKAGE_ROOT)


def imported_modules(tree: ast.Module, module: str, is_package: bool, known: set[str]) -> Iterator[str]:
    """Every ``airmirror`` module ``tree`` imports, anywhere in it (function bodies and ``TYPE_CHECKING``
    blocks included).  ``from P import x`` names module ``P.x`` when that is a module, else ``P``; relative
    imports are resolved against ``module``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.split(".")[0] == "airmirror")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                anchor = package[: len(package) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            if base.split(".")[0] != "airmirror":
                continue
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                yield candidate if candidate in known else base


def import_edges(modules: dict[str, Path]) -> set[tuple[str, str]]:
    known = set(modules)
    edges = set()
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for imported in imported_modules(tree, module, path.name == "__init__.py", known):
            edges.add((module, imported))
    return edges


def import_circle(edges: set[tuple[str, str]]) -> list[str]:
    """One import circle among ``edges`` (a module imports itself again through the others: the first module listed
    comes again at the end), or ``[]`` when there is none (the standard library's :mod:`graphlib` finds it)."""
    graph: dict[str, set[str]] = {}
    for importer, imported in edges:
        if importer != imported:
            graph.setdefault(importer, set()).add(imported)
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as circle:
        return list(reversed(circle.args[1]))
    return []


def owner(module: str) -> str | None:
    """The table's package that ``module`` belongs to (the longest match; the root package only by itself)."""
    matches = [p for p in RANK if module == p or (p != "airmirror" and module.startswith(p + "."))]
    return max(matches, key=len, default=None)


def in_devtools(module: str) -> bool:
    return module == DEVTOOLS or module.startswith(DEVTOOLS + ".")


def report(title: str, pairs: list[str]) -> str:
    return f"{title} ({len(pairs)}):\n" + "\n".join(f"  {pair}" for pair in pairs)


def test_collector_finds_every_kind_of_import() -> None:
    source = (
        "import airmirror.errors\n"
        "from airmirror import names, __version__\n"
        "from airmirror.config import FlowConfig\n"
        "from . import sibling\n"
        "from ..store import batches\n"
        "import json\n"
        "def later():\n"
        "    from airmirror.replication.spark.copy_job import run_copy_job\n"
    )
    known = {
        "airmirror", "airmirror.errors", "airmirror.names", "airmirror.config", "airmirror.kafka",
        "airmirror.kafka.sibling", "airmirror.store", "airmirror.store.batches",
        "airmirror.replication.spark.copy_job",
    }  # fmt: skip
    found = set(imported_modules(ast.parse(source), "airmirror.kafka.topics", False, known))
    assert found == {
        "airmirror.errors",
        "airmirror.names",
        "airmirror",
        "airmirror.config",
        "airmirror.kafka.sibling",
        "airmirror.store.batches",
        "airmirror.replication.spark.copy_job",
    }


def test_table_names_every_package_once() -> None:
    listed = [package for packages in LAYERS for package in packages]
    assert len(listed) == len(set(listed)), "a package appears twice in LAYERS"
    missing = sorted(package for package in listed if package not in MODULES)
    assert not missing, report("packages in LAYERS that do not exist under include/airmirror", missing)
    unknown = sorted(p for p, allowed in SAME_LAYER.items() for q in (p, *allowed) if q not in RANK)
    assert not unknown, report("SAME_LAYER names packages that LAYERS does not", unknown)


def test_every_module_belongs_to_a_layer() -> None:
    unplaced = {module for module in MODULES if owner(module) is None}
    pairs = sorted(f"{a} -> {b}" for a, b in import_edges(MODULES) if a in unplaced or b in unplaced)
    assert not unplaced, (
        report("modules of no package in LAYERS (add them to the table)", sorted(unplaced))
        + "\n"
        + report("imports of or by them, unchecked until they are placed", pairs)
    )


def test_nothing_imports_devtools() -> None:
    edges = import_edges(source_modules(INCLUDE))
    offending = sorted(f"{a} -> {b}" for a, b in edges if in_devtools(b) and not in_devtools(a))
    assert not offending, report("imports of airmirror.devtools from outside it", offending)


def test_imports_follow_the_layers() -> None:
    offending = []
    for module, imported in sorted(import_edges(MODULES)):
        mine, theirs = owner(module), owner(imported)
        if mine is None or theirs is None or mine == theirs:
            continue  # unplaced modules fail test_every_module_belongs_to_a_layer
        if RANK[theirs] < RANK[mine] or theirs in SAME_LAYER.get(mine, ()):
            continue
        where = "higher" if RANK[theirs] > RANK[mine] else "same"
        offending.append(f"{module} -> {imported}  ({mine} L{RANK[mine]} -> {theirs} L{RANK[theirs]}, {where} layer)")
    assert not offending, report("imports against the layering (LAYERS in tests/unit/test_layering.py)", offending)


def test_the_circle_finder_finds_a_circle_of_any_length_and_only_circles() -> None:
    circle = import_circle({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("f", "f"), ("g", "a")})
    assert circle[0] == circle[-1] and sorted(circle[1:]) == ["a", "b", "c"]
    assert import_circle({("a", "b"), ("b", "c"), ("f", "f")}) == []


def test_no_module_takes_part_in_an_import_circle() -> None:
    circle = import_circle(import_edges(source_modules(INCLUDE)))
    assert not circle, "an import circle (split a module so that one side no longer imports the other): " + (
        " -> ".join(circle)
    )
