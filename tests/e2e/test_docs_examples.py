"""Every example the docs mark as runnable runs as written against `make run`, so the docs cannot
drift from the product; every relative link resolves; the README stays a five-minute read.

A runnable example is a fenced `sh` or `python` block right after the line `<!-- runnable -->`
in README.md or docs/*.md. The blocks run in order (README first, then the pages by name), each
in a fresh shell or Python process, against one local gateway started for them, with `KEY` and
`BASE` set as the `make run` banner says (`export KEY=... BASE=...`). `curl` fails on any answer
of 400 or more (`--fail-with-body`), so an example that is refused fails the test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.conftest import DEMO_ACCESS_TOKEN, DEMO_KEY, ROOT, LocalGateway

MARKER = "<!-- runnable -->"
_FENCE = re.compile(r"^```([\w-]*)\s*$")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass
class Example:
    page: Path
    line: int
    language: str
    code: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def examples(page: Path) -> list[Example]:
    """The runnable blocks of a page, in order."""
    found: list[Example] = []
    lines = page.read_text().splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening and index and lines[index - 1].strip() == MARKER:
            end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
            if opening.group(1) not in ("sh", "python"):
                raise AssertionError(f"{page}:{index + 1}: a runnable block is sh or python, not {opening.group(1)!r}")
            found.append(Example(page, index + 1, opening.group(1), "\n".join(lines[index + 1:end]) + "\n"))
            index = end
        elif opening:  # skip the block, so a fence inside it is not read as an opening
            index = next((i for i in range(index + 1, len(lines)) if lines[i].startswith("```")), len(lines))
        index += 1
    return found


ALL = [example for page in PAGES for example in examples(page)]


@pytest.fixture(scope="module")
def docs_gateway(tmp_path_factory):
    server = LocalGateway()
    yield server
    server.release()


@pytest.fixture(scope="module")
def environment(docs_gateway, tmp_path_factory):
    shims = tmp_path_factory.mktemp("shims")
    curl = shims / "curl"
    real = subprocess.run(["sh", "-c", "command -v curl"], capture_output=True, text=True).stdout.strip()
    curl.write_text(f'#!/bin/sh\nexec {real} --fail-with-body -sS --max-time 60 "$@"\n')
    curl.chmod(0o755)
    env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    env.update({"KEY": DEMO_KEY, "BASE": docs_gateway.url, "ACCESS_TOKEN": DEMO_ACCESS_TOKEN,
                "PATH": f"{shims}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
                "GATEWAY_LOCAL_ENDPOINT_FILE": str(docs_gateway.endpoint_file)})
    return env


def test_the_docs_have_runnable_examples_on_every_page_that_shows_calls():
    pages = {example.page.name for example in ALL}
    assert {"README.md", "families.md", "tasks.md", "admin.md", "channels.md", "local.md"} <= pages
    assert sum(example.language == "python" for example in ALL) >= 3  # one per official SDK at least


@pytest.mark.parametrize("example", ALL, ids=str)
def test_each_runnable_example_runs_as_written(example, environment):
    command = ["bash", "-e", "-o", "pipefail", "-c", example.code] if example.language == "sh" \
        else [sys.executable, "-c", example.code]
    done = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"{example} failed ({done.returncode}):\n{example.code}\n--- stdout\n" \
                                 f"{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"


_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of a page."""
    anchors = set()
    for line in page.read_text().splitlines():
        if heading := re.match(r"^#{1,6}\s+(.*)", line):
            text = re.sub(r"[`*_]", "", heading.group(1)).strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return anchors


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    broken = []
    for target in _LINK.findall(page.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(target)
    assert not broken, f"{page.name}: {broken}"


def test_the_readme_is_a_five_minute_read():
    assert len((ROOT / "README.md").read_text().split()) < 1300
