#!/usr/bin/env python3
"""Checks the guide and the README for what a reader would trip over.

  scripts/check-docs.py [BOOK_HTML_DIR]

1. Markdown (README.md, docs/*.md, bench/README.md, bench/results/INDEX.md):
   every relative link resolves to a file, and every #anchor to a heading
   (or an explicit id) of that file; links in docs/ stay inside docs/, the
   book's source (elsewhere the built book has nothing to link to); every
   {{#include}} names a file that exists.
2. The built book (BOOK_HTML_DIR, when given): every relative href resolves
   to a file of the book and every #fragment to an id in it.
3. The README's programs: every C, C++ and Python code block is an exact
   excerpt of an example file (examples/), which the test command builds and
   runs; the dedented lines must appear there contiguously.

Python 3.11 standard library only. Exits 1, listing every problem.
"""
from __future__ import annotations

import html.parser
import re
import sys
import textwrap
from pathlib import Path
from urllib.parse import unquote, urlsplit

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
problems: list[str] = []

FENCE = re.compile(r"^(```+|~~~+)")
LINK = re.compile(r"(?<!\\)!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INCLUDE = re.compile(r"\{\{#include\s+([^}\s]+)\s*\}\}")


def slug(text: str) -> str:
    """A heading's id as mdBook and GitHub make it: lower case, letters,
    digits, '-' and '_' kept, spaces to '-', everything else dropped."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    out = []
    for ch in text.strip():
        if ch.isalnum() or ch in "-_":
            out.append(ch.lower())
        elif ch.isspace():
            out.append("-")
    return "".join(out)


def prose_lines(text: str):
    """(line number, line) outside fenced code, inline code blanked."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line.lstrip())
        if m:
            mark = m.group(1)[0] * 3
            if fence is None:
                fence = mark
            elif mark == fence:
                fence = None
            continue
        if fence is None:
            yield n, re.sub(r"`[^`]*`", "``", line)


def anchors(path: Path) -> set[str]:
    ids: set[str] = set()
    seen: dict[str, int] = {}
    text = path.read_text()
    for _, line in prose_lines(text):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            # Raw heading text: inline code was blanked above, so re-read it.
            pass
        ids.update(re.findall(r'\bid="([^"]+)"', line))
    fence = None
    for line in text.split("\n"):
        m = FENCE.match(line.lstrip())
        if m:
            fence = None if fence else m.group(1)[0]
            continue
        if fence:
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*$", line)
        if m:
            s = slug(m.group(1))
            k = seen.get(s, 0)
            ids.add(s if k == 0 else f"{s}-{k}")
            seen[s] = k + 1
    return ids


def check_markdown(path: Path) -> None:
    rel = path.relative_to(REPO)
    in_book = DOCS in path.parents
    text = path.read_text()
    for n, line in prose_lines(text):
        for target in LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            parts = urlsplit(target)
            dest = path if not parts.path else (path.parent / unquote(parts.path)).resolve()
            where = f"{rel}:{n}: {target}"
            if not dest.exists():
                problems.append(f"{where}: no such file")
                continue
            if in_book and DOCS not in dest.parents and dest != DOCS:
                problems.append(f"{where}: leaves docs/, so the built book cannot link it (name the file in code instead)")
                continue
            if parts.fragment:
                if dest.suffix != ".md":
                    problems.append(f"{where}: an anchor into a file that is not markdown")
                elif unquote(parts.fragment) not in anchors(dest):
                    problems.append(f"{where}: no heading #{parts.fragment} in {dest.relative_to(REPO)}")
    for n, line in enumerate(text.split("\n"), 1):
        for inc in INCLUDE.findall(line):
            target = (path.parent / inc.split(":")[0]).resolve()
            if not target.is_file():
                problems.append(f"{rel}:{n}: {{{{#include {inc}}}}}: no such file")


class Html(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        for key in ("href", "src"):
            if a.get(key) and tag in ("a", "img"):
                self.hrefs.append(a[key])


def check_book(root: Path) -> None:
    pages: dict[Path, Html] = {}

    def page(p: Path) -> Html:
        if p not in pages:
            h = Html()
            h.feed(p.read_text(errors="replace"))
            pages[p] = h
        return pages[p]

    files = sorted(root.rglob("*.html"))
    if not files:
        problems.append(f"{root}: no HTML: the book was not built")
    for f in files:
        if f.name in ("print.html", "404.html", "toc.html"):
            continue  # mdBook's own pages, made from the chapters checked here
        for href in page(f).hrefs:
            if re.match(r"[a-z][a-z0-9+.-]*:", href) or href.startswith("//"):
                continue
            parts = urlsplit(href)
            dest = f if not parts.path else (f.parent / unquote(parts.path)).resolve()
            where = f"book {f.relative_to(root)}: {href}"
            if dest.is_dir():
                dest = dest / "index.html"
            if not dest.exists():
                problems.append(f"{where}: no such file in the book")
            elif parts.fragment and dest.suffix == ".html" and unquote(parts.fragment) not in page(dest).ids:
                problems.append(f"{where}: no id #{parts.fragment} in {dest.relative_to(root)}")


def check_readme_programs() -> None:
    lang_dirs = {
        "c": ["examples/c/*.c"],
        "cpp": ["examples/cpp/*.cpp", "examples/cpp/*.hpp"],
        "c++": ["examples/cpp/*.cpp", "examples/cpp/*.hpp"],
        "python": ["examples/python/*.py"],
        "py": ["examples/python/*.py"],
    }
    text = (REPO / "README.md").read_text().split("\n")
    i = 0
    while i < len(text):
        m = re.match(r"^```(\S*)", text[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1).lower(), i + 1
        j = start
        while j < len(text) and not text[j].startswith("```"):
            j += 1
        block = textwrap.dedent("\n".join(text[start:j])).strip("\n").split("\n")
        i = j + 1
        if lang not in lang_dirs:
            continue
        found = False
        for pattern in lang_dirs[lang]:
            for ex in sorted(REPO.glob(pattern)):
                lines = ex.read_text().split("\n")
                for k in range(len(lines) - len(block) + 1):
                    window = textwrap.dedent("\n".join(lines[k : k + len(block)])).split("\n")
                    if window == block:
                        found = True
                        break
                if found:
                    break
            if found:
                break
        if not found:
            problems.append(f"README.md:{start}: this {lang} block is not an excerpt of any example file ({', '.join(lang_dirs[lang])}); copy it from one, which the tests build and run")


def main() -> None:
    sources = [REPO / "README.md", REPO / "bench" / "README.md", REPO / "bench" / "results" / "INDEX.md"]
    sources += sorted(DOCS.glob("*.md"))
    for p in sources:
        check_markdown(p)
    summary = DOCS / "SUMMARY.md"
    listed = set(re.findall(r"\]\(([^)]+\.md)\)", summary.read_text()))
    for p in sorted(DOCS.glob("*.md")):
        if p.name != "SUMMARY.md" and p.name not in listed:
            problems.append(f"docs/{p.name}: not in docs/SUMMARY.md, so not in the book")
    check_readme_programs()
    if len(sys.argv) > 1:
        check_book(Path(sys.argv[1]).resolve())
    for p in problems:
        print(f"check-docs: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"check-docs: {len(sources)} markdown files, links, anchors and README programs fine", file=sys.stderr)


if __name__ == "__main__":
    main()
