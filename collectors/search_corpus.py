"""The local search corpus: HTML documentation installed on the machine, read into pages and sections.

`make setup` builds it offline from Python's own HTML documentation (Debian's `python3-doc`, under
/usr/share/doc/python3.11/html), giving each page its public URL (https://docs.python.org/3.11/...), its
title, its "Last updated" date and its text as markdown. A search result is a section of a page (its URL
carries the section's anchor); `web_extractor` returns the whole page. Any Sphinx-style HTML tree can be
added as another source (`--source DIR=BASE_URL`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urljoin

from lxml import html as lxml_html

DEFAULT_SOURCES = {"/usr/share/doc/python3.11/html": "https://docs.python.org/3.11/"}
# Index-like pages (no prose of their own) and the documentation's own search/download pages.
SKIP_PAGES = re.compile(r"(^|/)(genindex[^/]*|py-modindex|search|download|contents)\.html$")
SKIP_DIRS = {"_sources", "_static", "_images", "_downloads"}
DROP_CLASSES = {"headerlink", "related", "sphinxsidebar", "footer", "clearer", "copybutton"}
DATE_RE = re.compile(r"Last updated on ([A-Z][a-z]+ \d{1,2}, \d{4})")


MD_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")


def plain_text(markdown: str) -> str:
    """Markdown as plain prose for indexing and snippets: link targets, code and emphasis marks dropped."""
    text = MD_LINK.sub(r"\1", markdown)
    text = re.sub(r"^#+ ", "", text, flags=re.M)
    text = text.replace("```", " ").replace("`", "").replace("**", "").replace("*", "")
    return re.sub(r"[ \t]+", " ", text)


@dataclass(frozen=True)
class Section:
    """One searchable unit: a section of a page, with the page's URL plus the section anchor."""

    url: str
    title: str
    date: str  # ISO date (YYYY-MM-DD)
    text: str  # markdown
    page_url: str


@dataclass(frozen=True)
class Page:
    """One page: its URL, title, date and full text as markdown (what web_extractor returns)."""

    url: str
    title: str
    date: str
    markdown: str
    sections: list[Section]


def page_date(raw_html: str, path: Path) -> str:
    """The page's "Last updated on ..." date, else the file's modification date (ISO)."""
    match = DATE_RE.search(raw_html)
    if match:
        return datetime.strptime(match.group(1), "%B %d, %Y").date().isoformat()
    return datetime.fromtimestamp(path.stat().st_mtime, tz=UTC).date().isoformat()


def _classes(el: lxml_html.HtmlElement) -> set[str]:
    return set((el.get("class") or "").split())


def _inline(el: lxml_html.HtmlElement, base: str) -> str:
    """Text of an inline subtree as markdown (code spans, links, emphasis)."""
    parts: list[str] = [el.text or ""]
    for child in el:
        if not isinstance(child.tag, str) or _classes(child) & DROP_CLASSES:
            parts.append(child.tail or "")
            continue
        inner = _inline(child, base)
        tag = child.tag
        if tag in ("code", "tt", "kbd", "samp"):
            inner = f"`{inner}`" if inner.strip() and "`" not in inner else inner
        elif tag == "a" and child.get("href") and inner.strip():
            href = urljoin(base, child.get("href"))
            inner = f"[{inner}]({href})"
        elif tag in ("em", "i") and inner.strip():
            inner = f"*{inner}*"
        elif tag in ("strong", "b") and inner.strip():
            inner = f"**{inner}**"
        elif tag == "br":
            inner = "\n"
        parts.append(inner)
        parts.append(child.tail or "")
    return "".join(parts)


def _norm(text: str) -> str:
    return re.sub(r"[ \t\r\n]+", " ", text).strip()


class MarkdownWriter:
    """Block-level HTML to markdown for documentation pages; records where each section starts."""

    BLOCKS = {"p", "pre", "ul", "ol", "dl", "table", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6"}

    def __init__(self, base: str) -> None:
        self.base = base
        self.blocks: list[str] = []
        self.section_starts: list[tuple[int, str, str]] = []  # (block index, anchor, heading)

    def _plain(self, el: lxml_html.HtmlElement) -> str:
        return _norm(plain_text(_inline(el, self.base)))

    def write(self, el: lxml_html.HtmlElement, depth: int = 0) -> None:
        if not isinstance(el.tag, str) or _classes(el) & DROP_CLASSES or el.tag in ("script", "style", "nav"):
            return
        tag = el.tag
        if tag == "section" and el.get("id"):
            heading = next((c for c in el if isinstance(c.tag, str) and re.fullmatch(r"h[1-6]", c.tag)), None)
            title = self._plain(heading) if heading is not None else el.get("id", "")
            self.section_starts.append((len(self.blocks), el.get("id", ""), title))
        if re.fullmatch(r"h[1-6]", tag):
            self.blocks.append("#" * int(tag[1]) + " " + _norm(_inline(el, self.base)))
        elif tag == "p":
            text = _norm(_inline(el, self.base))
            if text:
                self.blocks.append(text)
        elif tag == "pre":
            self.blocks.append("```\n" + el.text_content().rstrip("\n") + "\n```")
        elif tag in ("ul", "ol"):
            items = [c for c in el if c.tag == "li"]
            lines = []
            for i, li in enumerate(items, start=1):
                marker = f"{i}." if tag == "ol" else "-"
                lines.append(f"{marker} {_norm(_inline(li, self.base))}")
            if lines:
                self.blocks.append("\n".join(lines))
        elif tag == "dl":
            for child in el:
                if child.tag == "dt":
                    signature = _norm(_inline(child, self.base))
                    if child.get("id"):  # an API entry (function, class, ...): a section of its own
                        self.section_starts.append(
                            (len(self.blocks), child.get("id", ""), self._plain(child))
                        )
                    self.blocks.append("**" + signature + "**")
                elif child.tag == "dd":
                    for grandchild in child:
                        self.write(grandchild, depth + 1)
                    if child.text and child.text.strip():
                        self.blocks.append(_norm(child.text))
        elif tag == "table":
            rows = []
            for tr in el.iter("tr"):
                cells = [
                    _norm(_inline(td, self.base)).replace("|", "\\|") for td in tr if td.tag in ("td", "th")
                ]
                rows.append("| " + " | ".join(cells) + " |")
            if rows:
                width = rows[0].count(" | ") + 1
                rows.insert(1, "|" + " --- |" * width)
                self.blocks.append("\n".join(rows))
        else:
            for child in el:
                self.write(child, depth + 1)

    def markdown(self, start: int = 0, end: int | None = None) -> str:
        return "\n\n".join(self.blocks[start:end])


def read_page(path: Path, url: str) -> Page | None:
    """A documentation page as markdown with its sections; None for a page without a main body."""
    raw = path.read_text("utf-8", errors="replace")
    tree = lxml_html.fromstring(raw)
    bodies = tree.xpath('//div[@role="main"]') or tree.xpath('//div[contains(@class, "body")]')
    if not bodies:
        return None
    title_el = tree.find(".//title")
    title = _norm(title_el.text_content()) if title_el is not None else path.stem
    title = re.sub(r"\s+[—-]\s+Python [\d.]+ documentation$", "", title)
    date = page_date(raw, path)
    writer = MarkdownWriter(url)
    writer.write(bodies[0])
    markdown = writer.markdown()
    if not markdown.strip():
        return None
    sections: list[Section] = []
    starts = writer.section_starts
    for i, (start, anchor, heading) in enumerate(starts):
        # A section's own text runs to the start of the next section (nested or not).
        end = starts[i + 1][0] if i + 1 < len(starts) else None
        text = writer.markdown(start, end)
        if not _norm(text.lstrip("#")):
            continue
        section_title = title if i == 0 else f"{heading} — {title}"
        section_url = url if i == 0 else f"{url}#{anchor}"
        sections.append(Section(section_url, section_title, date, text, url))
    if not sections:
        sections.append(Section(url, title, date, markdown, url))
    return Page(url, title, date, markdown, sections)


def iter_pages(sources: dict[str, str]) -> Iterator[Page]:
    """Every page under each source folder (folder -> base URL), in path order."""
    for folder, base in sources.items():
        root = Path(folder)
        if not root.is_dir():
            raise FileNotFoundError(
                f"documentation folder {root} is missing (Debian: apt-get install python3-doc, "
                "which infra/install-system.sh installs)"
            )
        for path in sorted(root.rglob("*.html")):
            rel = path.relative_to(root).as_posix()
            if SKIP_PAGES.search(rel) or SKIP_DIRS & set(path.relative_to(root).parts):
                continue
            page = read_page(path, urljoin(base, rel))
            if page is not None:
                yield page
