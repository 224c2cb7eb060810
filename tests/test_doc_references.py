"""Every ``docs/method.md §N`` cited in the source resolves to a section of that document."""

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
