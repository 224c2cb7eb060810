"""The documentation holds together: every relative link resolves (anchors included), every
repository path and config field a page cites exists, nothing in the repository cites a document
it does not contain, the README stays a short guide, its code runs, and BENCHMARKS.md keeps one
``make bench`` block per benchmark of bench/update_benchmarks.py.

Each check is a function returning the problems it found, so that a test can plant a broken page
and see the check fail (``test_the_checks_catch_a_planted_broken_page``).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from distillscope.config import RunConfig

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "distillscope"
README_MAX_LINES = 200
#: First path components that name a folder of the repository root.
ROOT_DIRS = ("src", "tests", "bench", "configs", "docs", ".ci")
ROOT_FILES = ("README.md", "BENCHMARKS.md", "Makefile", "pyproject.toml")
#: Config sections, as cited in the docs (`rollout.policy`, `optim.lr=3e-4`).
SECTIONS = ("model", "task", "rollout", "objective", "optim", "eval")
#: `eval.json`, `model.safetensors`: file names that look like a section and a field.
NOT_FIELDS = {"json", "jsonl", "yaml", "md", "py", "parquet", "html", "safetensors", "bin"}

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)
#: A path under one of the root folders, anywhere in a page's text.
ROOT_PATH = re.compile(r"(?<![\w/.-])(?:" + "|".join(map(re.escape, ROOT_DIRS)) + r")/[\w.*/-]*")
#: A document named in capitals (README.md, DESIGN.md), or by a bare capitalised name in a
#: citation (`DESIGN "Data flow"`, `METHOD §7`, `METHOD Eq. 1`).
CAPS_DOC = re.compile(r"\b([A-Z][A-Z0-9_-]+\.md)\b")
CAPS_CITATION = re.compile(r"\b([A-Z]{4,})(?:\.md)? +(?:§|\"|Eq\b|section\b)")
#: A section of the README or BENCHMARKS.md cited by its title (`BENCHMARKS.md "Sampler"`).
SECTION_CITATION = re.compile(r"\b(README|BENCHMARKS)(?:\.md,?)? +\"([^\"\n]+)\"")


def doc_pages() -> list[Path]:
    """README.md, BENCHMARKS.md and every page under docs/."""
    return [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").rglob("*.md"))]


def source_files() -> list[Path]:
    """Every text file of src/, tests/, bench/ and docs/ that may cite a document."""
    suffixes = {".py", ".md", ".yaml", ".sh", ".toml", ".txt"}
    found = []
    for folder in ("src", "tests", "bench", "docs"):
        found += [p for p in sorted((ROOT / folder).rglob("*")) if p.suffix in suffixes]
    here = Path(__file__).resolve()
    return [p for p in found if p.resolve() != here and ".egg-info" not in str(p)]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: link markup reduced to its text, lower case, every
    character but letters, digits, ``_``, ``-`` and spaces dropped, spaces turned into ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of ``page``'s headings (a repeated heading gets ``-1``, ``-2``, …)."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def broken_links(page: Path) -> list[str]:
    """Relative links of ``page`` (outside code) whose file, or whose heading anchor, is
    missing; web and mail links are not followed."""
    problems = []
    for target in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            problems.append(f"{page.name}: link to {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{page.name}: link to {target}: no such heading")
    return problems


def _exists(base: Path, rel: str) -> bool:
    rel = rel.rstrip("/")
    return any(base.glob(rel)) if "*" in rel else (base / rel).exists()


def path_problem(token: str) -> str | None:
    """Why ``token``, cited as a path of the repository, does not exist (None if it does or is
    not such a path). Paths start at the repository root (`src/…`, `bench/…`, `docs/…`) or at
    the package (`rollout/fast_decode.py`); names of run-directory files are not paths."""
    token = token.strip().rstrip(".,:;)")
    if token in ROOT_FILES:
        return None
    first, _, _ = token.partition("/")
    if not re.fullmatch(r"[\w.*/-]+", token) or not _ or token.startswith("/"):
        return None
    if first in ROOT_DIRS:
        base = ROOT
    elif (PACKAGE / first).is_dir() and re.search(r"\.(py|yaml|json)$|/$", token):
        base = PACKAGE
    else:
        return None
    return None if _exists(base, token) else f"cites {token}, which does not exist"


def config_fields() -> set[str]:
    """Every dotted field of the config tree (``rollout.policy``, ``optim.lr``, …)."""
    fields: set[str] = set()

    def walk(model: type, prefix: str) -> None:
        for name, info in model.model_fields.items():
            ann = info.annotation
            if isinstance(ann, type) and hasattr(ann, "model_fields"):
                walk(ann, f"{prefix}{name}.")
            else:
                fields.add(prefix + name)

    walk(RunConfig, "")
    return fields


def cited_tokens(text: str) -> list[str]:
    """Code spans and the words of fenced blocks: where pages cite paths and config fields."""
    words = [w for block in FENCE.findall(text) for w in block.split()]
    return CODE_SPAN.findall(FENCE.sub("", text)) + words


def page_problems(page: Path, fields: set[str]) -> list[str]:
    """Paths and config fields ``page`` cites that do not exist."""
    text = page.read_text(encoding="utf-8")
    problems = []
    for token in sorted(set(ROOT_PATH.findall(text)) | set(cited_tokens(text))):
        found = path_problem(token)
        if found:
            problems.append(f"{page.name}: {found}")
        field = re.fullmatch(r"((?:" + "|".join(SECTIONS) + r")\.(\w+))[=:]?.*", token.strip())
        if field and field.group(2) not in NOT_FIELDS and field.group(1) not in fields:
            problems.append(f"{page.name}: cites config field {field.group(1)}, which is not one")
    return problems


def missing_documents(text: str, where: str) -> list[str]:
    """Documents ``text`` (of file ``where``) cites by a capitalised name that the repository
    does not contain, at its root or under docs/."""
    names = set(CAPS_DOC.findall(text)) | {f"{n}.md" for n in CAPS_CITATION.findall(text)}
    return [
        f"{where} cites {name}, which is not in the repository"
        for name in sorted(names)
        if not ((ROOT / name).exists() or (ROOT / "docs" / name).exists())
    ]


def cli_commands() -> dict[str, set[str]]:
    """The CLI's commands, each with its subcommands (empty for a plain command)."""
    import typer

    from distillscope.cli import app

    group = typer.main.get_command(app)
    return {
        name: set(getattr(command, "commands", {}))
        for name, command in group.commands.items()  # type: ignore[attr-defined]
    }


def command_problems(page: Path, commands: dict[str, set[str]]) -> list[str]:
    """``distillscope WORD [SUB]`` invocations in ``page``'s code that the CLI does not have."""
    problems = []
    text = page.read_text(encoding="utf-8")
    code = "\n".join(FENCE.findall(text) + CODE_SPAN.findall(FENCE.sub("", text)))
    for name, sub in re.findall(r"\bdistillscope +([a-z][\w-]*)(?: +([a-z][\w-]*))?", code):
        if name not in commands:
            problems.append(f"{page.name}: `distillscope {name}` is not a command")
        elif commands[name] and sub and sub not in commands[name]:
            problems.append(f"{page.name}: `distillscope {name} {sub}` is not a command")
    return problems


def missing_sections(text: str, where: str) -> list[str]:
    """Sections of README.md or BENCHMARKS.md that ``text`` cites by title and that no heading
    of that page contains (case-insensitive)."""
    problems = []
    for doc, title in SECTION_CITATION.findall(text):
        page = ROOT / f"{doc}.md"
        headings = HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8")))
        if not any(title.lower() in h.lower() for h in headings):
            problems.append(f'{where} cites {doc}.md "{title}", which has no such section')
    return problems


def bench_names() -> list[str]:
    """The benchmark names of bench/update_benchmarks.py (its ``BENCHMARKS`` dict), read from
    the source so that no torch import is needed."""
    tree = ast.parse((ROOT / "bench" / "update_benchmarks.py").read_text())
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id == "BENCHMARKS":
            return [ast.literal_eval(k) for k in node.value.keys]
    raise AssertionError("bench/update_benchmarks.py has no BENCHMARKS dict")


def bench_block_problems(text: str, names: list[str]) -> list[str]:
    """Each benchmark has exactly one ``<!-- bench:NAME -->…<!-- /bench:NAME -->`` block, and
    no block belongs to a name the updater does not know."""
    problems = []
    for name in names:
        begin, end = text.count(f"<!-- bench:{name} -->"), text.count(f"<!-- /bench:{name} -->")
        if (begin, end) != (1, 1) or text.index(f"<!-- bench:{name} -->") > text.index(
            f"<!-- /bench:{name} -->"
        ):
            problems.append(f"bench:{name}: {begin} opening and {end} closing markers")
    for name in set(re.findall(r"<!-- /?bench:([\w-]+) -->", text)) - set(names):
        problems.append(f"bench:{name}: a block the updater does not write")
    return problems


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(page):
    assert not broken_links(page)


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_cited_paths_and_fields_exist(page):
    assert not page_problems(page, config_fields())


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_cli_invocations_exist(page):
    assert not command_problems(page, cli_commands())


def test_no_file_cites_a_document_the_repository_lacks():
    problems = []
    for path in [*source_files(), ROOT / "README.md", ROOT / "BENCHMARKS.md"]:
        text = path.read_text(encoding="utf-8", errors="replace")
        problems += missing_documents(text, str(path.relative_to(ROOT)))
        problems += missing_sections(text, str(path.relative_to(ROOT)))
    assert not problems


def test_readme_is_a_short_guide():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_bench_blocks_match_the_updater():
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert not bench_block_problems(text, bench_names())


def test_python_examples_run(tmp_path):
    """Every ```python block of the README and the docs pages runs as written."""
    pages = [p for p in doc_pages() if "notes" not in p.parts]
    python = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
    blocks = [b for p in pages for b in python.findall(p.read_text(encoding="utf-8"))]
    assert blocks, "no Python example found: the pattern is wrong"
    for code in blocks:
        done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True)
        assert done.returncode == 0, done.stderr.decode()[-2000:]


def test_the_checks_catch_a_planted_broken_page(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n[ok](page.md#title) [gone](missing.md) [anchor](page.md#nowhere)\n"
        "`src/distillscope/not_a_module.py` and `rollout/no_such_file.py`, `rollout.polcy`\n"
        'as DESIGN "Data flow" says, and METHOD §7; see NOTES.md and BENCHMARKS.md "Nowhere".\n'
        "<!-- bench:train -->\n<!-- /bench:train -->\n<!-- bench:gone -->\n",
        encoding="utf-8",
    )
    planted = page.read_text(encoding="utf-8")
    links = broken_links(page)
    assert len(links) == 2 and "missing.md" in links[0] and "#nowhere" in links[1]
    problems = page_problems(page, config_fields())
    assert any("not_a_module.py" in p for p in problems)
    assert any("rollout/no_such_file.py" in p for p in problems)
    assert any("rollout.polcy" in p for p in problems)
    cited = missing_documents(page.read_text(encoding="utf-8"), "page.md")
    assert [c.split()[2].rstrip(",") for c in cited] == ["DESIGN.md", "METHOD.md", "NOTES.md"]
    assert missing_sections(page.read_text(encoding="utf-8"), "page.md") == [
        'page.md cites BENCHMARKS.md "Nowhere", which has no such section'
    ]
    page.write_text("```bash\ndistillscope trian x\ndistillscope testbed bild\n```\n")
    commands = command_problems(page, {"train": set(), "testbed": {"build"}})
    assert commands == [
        "page.md: `distillscope trian` is not a command",
        "page.md: `distillscope testbed bild` is not a command",
    ]
    blocks = bench_block_problems(planted, ["train", "study"])
    assert any("bench:study" in p for p in blocks) and any("bench:gone" in p for p in blocks)
