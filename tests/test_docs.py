"""Every runnable code block in ``docs/`` runs, so the documentation cannot rot.

The convention (documented in ``docs/index.md``): an HTML comment ``<!-- run -->`` on
the line before a ```` ```python ```` fence marks the block as a complete program.
It is run on its own in a fresh interpreter (blocks share nothing), from an empty
temporary directory, with a timeout. When the block is followed by an
``<!-- output -->`` comment and a fenced block, its stdout must equal that block.

The comments are invisible in the rendered site, and the fences stay plain
``python`` so every Markdown renderer highlights them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The module fixture runs every block (example) side by side before the first test: its
# time is charged to that test, so the limit covers the whole batch on a loaded machine.
pytestmark = pytest.mark.timeout(900)
DOCS = ROOT / "docs"
TIMEOUT = 30.0

RUN = re.compile(r"^\s*<!--\s*run\s*-->\s*$")
OUTPUT = re.compile(r"^\s*<!--\s*output\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    code: str
    expected: str | None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


class DocsError(Exception):
    """A marker that does not mark what it should."""


def _read_fence(lines: list[str], i: int, where: str) -> tuple[str, str, int]:
    """The info string and dedented body of the fence opened at line ``i``, and the
    index of the line after its closing fence."""
    match = FENCE.match(lines[i])
    assert match is not None
    indent, fence = match["indent"], match["fence"]
    closing = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
    body: list[str] = []
    j = i + 1
    while j < len(lines) and not closing.match(lines[j]):
        line = lines[j]
        body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
        j += 1
    if j >= len(lines):
        raise DocsError(f"{where}: the code block is never closed")
    return match["info"].strip(), textwrap.dedent("\n".join(body)) + "\n", j + 1


def _skip_blank(lines: list[str], i: int) -> int:
    while i < len(lines) and not lines[i].strip():
        i += 1
    return i


def extract(path: Path) -> list[Block]:
    """The runnable blocks of one page. Markers inside fences (like the example in
    docs/index.md) are text, not markers: every fence's body is skipped whole."""
    lines = path.read_text(encoding="utf-8").splitlines()
    rel = path.relative_to(ROOT)
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        if RUN.match(lines[i]):
            marker = i
            i = _skip_blank(lines, i + 1)
            if i >= len(lines) or not FENCE.match(lines[i]):
                raise DocsError(f"{rel}:{marker + 1}: <!-- run --> must be followed by a "
                                "```python block")
            info, code, i = _read_fence(lines, i, f"{rel}:{marker + 1}")
            if info.split()[:1] not in (["python"], ["py"]):
                raise DocsError(f"{rel}:{marker + 1}: <!-- run --> marks a {info or 'plain'!r} "
                                "block; only python blocks run")
            fence_line = _skip_blank(lines, marker + 1) + 1
            expected = None
            k = _skip_blank(lines, i)
            if k < len(lines) and OUTPUT.match(lines[k]):
                out = _skip_blank(lines, k + 1)
                if out >= len(lines) or not FENCE.match(lines[out]):
                    raise DocsError(f"{rel}:{k + 1}: <!-- output --> must be followed by a block")
                _, expected, i = _read_fence(lines, out, f"{rel}:{k + 1}")
            blocks.append(Block(path, fence_line, code, expected))
        elif FENCE.match(lines[i]):
            _, _, i = _read_fence(lines, i, f"{rel}:{i + 1}")
        else:
            i += 1
    return blocks


def collect() -> list[Block]:
    blocks: list[Block] = []
    for path in sorted(DOCS.rglob("*.md")):
        blocks.extend(extract(path))
    return blocks


BLOCKS = collect()


def _run(block: Block, workdir: Path) -> subprocess.CompletedProcess[str]:
    script = workdir / f"{block.where.replace('/', '_').replace(':', '_')}.py"
    script.write_text(block.code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if k not in {"OPENAI_API_KEY", "OPENAI_BASE_URL", "FORCE_COLOR"}}
    env["PYTHONIOENCODING"] = "utf-8"
    try:
        return subprocess.run(
            [sys.executable, str(script)],
            cwd=workdir,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=TIMEOUT,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(exc.cmd, -1, "", f"timed out after {TIMEOUT}s")


@pytest.fixture(scope="module")
def results(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, subprocess.CompletedProcess[str]]:
    # Interpreter start-up dominates a block's run time: run them side by side. The
    # work dirs are made first: tmp_path_factory is not safe to use from threads.
    workdirs = {block.where: tmp_path_factory.mktemp("doc") for block in BLOCKS}

    def one(block: Block) -> tuple[str, subprocess.CompletedProcess[str]]:
        return block.where, _run(block, workdirs[block.where])

    with ThreadPoolExecutor(max_workers=max(2, (os.cpu_count() or 2) * 2)) as pool:
        return dict(pool.map(one, BLOCKS))


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_block_runs(block: Block, results: dict[str, subprocess.CompletedProcess[str]]) -> None:
    proc = results[block.where]
    if proc.returncode != 0:
        pytest.fail(
            f"{block.where}: the example exited with {proc.returncode}\n"
            f"--- stderr ---\n{proc.stderr}\n--- stdout ---\n{proc.stdout}",
            pytrace=False,
        )
    if block.expected is not None:
        got = [line.rstrip() for line in proc.stdout.rstrip().splitlines()]
        want = [line.rstrip() for line in block.expected.rstrip().splitlines()]
        if got != want:
            pytest.fail(
                f"{block.where}: the output differs from the <!-- output --> block\n"
                f"--- expected ---\n{block.expected}--- got ---\n{proc.stdout}",
                pytrace=False,
            )


def test_the_concept_pages_have_runnable_examples() -> None:
    pages = {b.path.relative_to(DOCS).as_posix() for b in BLOCKS}
    for page in ("index.md", "getting-started.md", "concepts/plan.md", "concepts/hooks.md",
                 "concepts/events.md", "concepts/context.md", "concepts/sessions.md"):
        assert page in pages, f"docs/{page} has no <!-- run --> example"


def test_extractor(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n<!-- run -->\n```python\nprint('a')\n```\n\n<!-- output -->\n```text\na\n```\n"
        "!!! note\n    <!-- run -->\n    ```python\n    if True:\n        print(1)\n    ```\n"
        "```python\nnot marked\n```\n"
        "````markdown\n<!-- run -->\n```python\nraise SystemExit(1)\n```\n````\n",
        encoding="utf-8",
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        first, second = extract(page)
        assert (first.line, first.code, first.expected) == (3, "print('a')\n", "a\n")
        assert (second.line, second.code, second.expected) == (13, "if True:\n    print(1)\n", None)
        page.write_text("<!-- run -->\nprose\n", encoding="utf-8")
        with pytest.raises(DocsError, match=r"page\.md:1"):
            extract(page)
    finally:
        ROOT = saved


def test_api_reference_lists_every_public_name() -> None:
    import rx_agent

    page = (DOCS / "reference" / "api.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^::: rx_agent\.(\w+)\s*$", page, re.MULTILINE))
    public = set(rx_agent.__all__) - {"__version__"}
    assert not public - documented, f"add to docs/reference/api.md: {sorted(public - documented)}"
    assert not documented - public, f"not public any more: {sorted(documented - public)}"


# -- install commands that work; the differences list what a Java user must know --------

EXTRAS = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
             ["project"]["optional-dependencies"])
PIP_INSTALL = re.compile(r"pip install\s+(?P<args>[^`#&\n\"]*)")
THIRD_PARTY = {"nox"}  # tools the docs install from the package index


def _install_commands() -> list[tuple[str, str]]:
    """(where, target) for every ``pip install`` target in the README, the docs, the
    examples and the tracing package's messages."""
    files = [ROOT / "README.md", *sorted(DOCS.rglob("*.md")),
             *sorted((ROOT / "examples").glob("*.py")),
             *sorted((ROOT / "rx_agent" / "tracing").glob("*.py"))]
    found = []
    for path in files:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in PIP_INSTALL.finditer(line):
                for target in match["args"].split():
                    if not target.startswith("-"):
                        found.append((f"{path.relative_to(ROOT)}:{n}", target.strip("'")))
    return found


def test_install_commands_name_a_checkout_and_extras_that_exist() -> None:
    commands = _install_commands()
    assert len(commands) > 5
    for where, target in commands:
        if target in THIRD_PARTY:
            continue
        # rx-agent is not on the package index: it installs from a checkout.
        match = re.fullmatch(r"\.(?:\[(?P<extras>[\w,-]+)\])?", target)
        assert match, f"{where}: `pip install {target}` cannot work; use a checkout ('.')"
        unknown = set((match["extras"] or "").split(",")) - EXTRAS - {""}
        assert not unknown, f"{where}: no such extra {sorted(unknown)}; extras: {sorted(EXTRAS)}"


def test_the_install_section_lists_every_extra() -> None:
    page = (DOCS / "index.md").read_text(encoding="utf-8")
    section = page.split("## Install", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([\w-]+)` \|", section, re.MULTILINE))
    assert listed == EXTRAS
    assert "pip install -e ." in section


def test_porting_lists_partial_confirmation_among_the_differences() -> None:
    page = (DOCS / "porting.md").read_text(encoding="utf-8")
    differences = page.split("## Deliberate differences", 1)[1]
    entry = re.search(r"^- Partial confirmation.*?(?=^- |^\*\*|\Z)", differences,
                      re.MULTILINE | re.DOTALL)
    assert entry, "docs/porting.md: no difference entry for partial confirmation"
    assert "ResumeError" in entry.group(0)
    hitl = (DOCS / "hitl.md").read_text(encoding="utf-8")
    assert "must answer every waiting call" in hitl
