"""Rule ids: a rule of the library is a numbered item of a module docstring, cited as ``<module> rule <n>``
(``task_writer rule 4``) or ``rule <n> of :mod:`airmirror...<module>```.  The ids are unique across modules, every
citation names a rule that exists, a test names the module of the rules it cites, and every rule of the copy
protocol is cited by a test that proves it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "include" / "airmirror"
CITING = [ROOT / "include", ROOT / "tests", ROOT / "dags", ROOT / "plugins", ROOT / "spark_apps", ROOT / "docs"]
COPY_PROTOCOL = ("task_writer", "batch_log", "deliveries", "standing", "job_driver", "streaming", "range_commits")
"""The modules whose rules make up the copy protocol: each of their rules is cited by a test."""

NUMBERS = r"(\d+)(?:\s*(?:-|and|,)\s*(\d+))?"
BY_NAME = re.compile(rf"`*(\w+)`*\s+rules?\s+{NUMBERS}", re.IGNORECASE)
OF_MODULE = re.compile(rf"\brules?\s+{NUMBERS}\s+of\s+(?::mod:)?`*~?(?:airmirror\.)?([\w.]*\w)`*(?=[\s),.;:]|$)")
BARE = re.compile(rf"\brules?\s+{NUMBERS}")


def ruled_modules() -> dict[str, set[int]]:
    """Each module stem whose docstring numbers rules, with the rule numbers; a stem ruled twice fails."""
    ruled: dict[str, set[int]] = {}
    for path in sorted(LIBRARY.rglob("*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        numbers = {int(n) for n in re.findall(r"^(\d+)\. ", docstring, re.MULTILINE)}
        if numbers:
            assert path.stem not in ruled, f"two modules number rules as {path.stem}: rule ids would not be unique"
            ruled[path.stem] = numbers
    return ruled


def spans(first: str, last: str | None) -> range:
    return range(int(first), int(last or first) + 1)


def citations(text: str, ruled: dict[str, set[int]]) -> list[tuple[str, int]]:
    """The ``(module, rule)`` pairs ``text`` cites of ruled modules."""
    flat = " ".join(text.split())
    found = [
        (name.lower(), n)
        for name, first, last in BY_NAME.findall(flat)
        if name.lower() in ruled
        for n in spans(first, last)
    ]
    for first, last, dotted in OF_MODULE.findall(flat):
        stem = dotted.rsplit(".", 1)[-1]
        found.extend((stem, n) for n in spans(first, last) if stem in ruled)
    return found


def citing_files() -> list[Path]:
    return [path for root in CITING for path in sorted(root.rglob("*")) if path.suffix in (".py", ".md")]


def test_rule_ids_are_unique_across_modules_and_every_citation_names_a_rule_that_exists() -> None:
    ruled = ruled_modules()
    missing = [
        f"{path.relative_to(ROOT)}: {stem} rule {n}"
        for path in citing_files()
        for stem, n in citations(path.read_text(), ruled)
        if n not in ruled[stem]
    ]
    assert not missing, "citations of rules that do not exist:\n" + "\n".join(missing)


def test_a_test_names_the_module_of_every_rule_it_cites() -> None:
    """Inside a library module a rule cited by number alone is its own; a test has none, so it says whose."""
    ruled = ruled_modules()
    bare = [
        f"{path.relative_to(ROOT)}: ...{flat[max(0, m.start() - 30) : m.end()]}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if (flat := " ".join(path.read_text().split()))
        for m in BARE.finditer(flat)
        if not names_its_module(flat, m, ruled)
    ]
    assert not bare, "rules cited without their module:\n" + "\n".join(bare)


def names_its_module(flat: str, cited: re.Match[str], ruled: dict[str, set[int]]) -> bool:
    """Whether a ``rule N`` in ``flat`` comes after a ruled module's name (``health rule 3``) or before ``of``."""
    before = re.search(r"(\w+)\W*$", flat[: cited.start()])
    return (before is not None and before.group(1).lower() in ruled) or flat[cited.end() :].lstrip().startswith("of ")


def test_every_rule_of_the_copy_protocol_is_cited_by_a_test() -> None:
    ruled = ruled_modules()
    cited = {pair for path in sorted((ROOT / "tests").rglob("*.py")) for pair in citations(path.read_text(), ruled)}
    uncited = [f"{stem} rule {n}" for stem in COPY_PROTOCOL for n in sorted(ruled[stem]) if (stem, n) not in cited]
    assert not uncited, "rules of the copy protocol no test cites:\n" + "\n".join(uncited)
