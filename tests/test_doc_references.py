"""What the docs point at exists: every ``docs/method.md §N`` cited in the source resolves to a
section of that document; every Python file the README and docs/ name is a file of the
repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
METHOD = ROOT / "docs" / "method.md"
CITATION = re.compile(r"docs/method\.md (§[0-9.]+(?:\s*[–-]\s*§?[0-9.]+)?(?:,\s*§[0-9.]+)*)")


def _sections() -> set[str]:
    return {m.group(1) for m in re.finditer(r"^## (\d+)\. ", METHOD.read_text(), re.M)}


def _cited() -> list[tuple[str, str]]:
    found = []
    for path in sorted((ROOT / "src").rglob("*.py")):
        for match in CITATION.finditer(path.read_text()):
            for number in re.findall(r"§\s*(\d+)", match.group(1)):
                found.append((f"{path.relative_to(ROOT)}", number))
    return found


def test_every_method_citation_resolves():
    sections = _sections()
    assert sections == {str(n) for n in range(1, 11)}
    cited = _cited()
    assert cited, "no citations found: the pattern is wrong"
    missing = [(where, n) for where, n in cited if n not in sections]
    assert not missing, missing


def test_no_citation_points_outside_the_repository():
    stale = []
    for path in sorted((ROOT / "src").rglob("*.py")):
        text = path.read_text()
        if re.search(r"\bMETHOD\b|distillscope\.train\.keys", text):
            stale.append(str(path.relative_to(ROOT)))
    assert not stale, stale


def test_every_file_the_readme_map_names_exists_in_its_folder():
    """The README's "Map of the code" names files under each stage's folder and beside the
    pipeline: a module renamed or moved fails here until the map follows it."""
    text = (ROOT / "README.md").read_text()
    part = text[text.index("## Map of the code") : text.index("## Documentation")]
    package = ROOT / "src" / "distillscope"
    named = []
    for row in re.finditer(r"^\| [^|]+ \| `([a-z_]+)/` \| (.+) \|$", part, re.M):
        folder, files = package / row.group(1), row.group(2)
        named += [folder / name for name in re.findall(r"`([a-z_]+(?:\.py|/))`", files)]
    beside = part[part.index("Beside the pipeline") :]
    named += [package / name for name in re.findall(r"`([a-z_]+(?:\.py|/))`", beside)]
    assert len(named) > 60
    missing = [str(p.relative_to(ROOT)) for p in named if not p.exists()]
    assert not missing, missing


def test_every_python_file_the_docs_name_exists():
    """A ``name.py`` or ``folder/name.py`` in backticks in the README or docs/ (not the dated
    notes, which describe the code of their day) names a file of the repository."""
    files = [
        p.relative_to(ROOT).as_posix()
        for top in ("src", "tests", "bench")
        for p in (ROOT / top).rglob("*.py")
    ] + [p.name for p in ROOT.glob("*.py")]
    names = {f.rsplit("/", 1)[-1] for f in files}
    docs = [
        ROOT / "README.md",
        *(p for p in (ROOT / "docs").rglob("*.md") if "notes" not in p.parts),
    ]
    missing = []
    for doc in docs:
        for named in re.findall(r"`([A-Za-z0-9_./-]+\.py)`", doc.read_text()):
            if "NN" in named:  # a pattern (`cNN_short_name.py`), not a file
                continue
            found = any(f.endswith(f"/{named}") or f == named for f in files)
            if not (found if "/" in named else named in names):
                missing.append(f"{doc.relative_to(ROOT)}: {named}")
    assert not missing, missing
