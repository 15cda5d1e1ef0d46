"""A report's Markdown as one self-contained HTML page: rendered with Python-Markdown, styled by an
inline stylesheet, every image under the report directory embedded as a ``data:`` URI, so the one
file can be mailed, attached to a ticket or opened from anywhere.

Reports (:func:`ledgercache.report.write_report`, the calibration's) write their Markdown, then
:func:`write_page` writes ``<stem>.md`` and ``<stem>.html`` side by side."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

__all__ = ["CSS", "html_page", "markdown_table", "write_page"]

CSS = """
:root { --ink: #1f2328; --muted: #57606a; --line: #d0d7de; --band: #f6f8fa; --accent: #0969da; }
body { font: 15px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--ink);
       max-width: 1280px; margin: 0 auto; padding: 24px 28px 64px; }
h1 { font-size: 1.9em; margin: 0 0 .3em; }
h2 { font-size: 1.45em; margin: 1.8em 0 .5em; padding-bottom: .25em; border-bottom: 1px solid var(--line); }
h3 { font-size: 1.15em; margin: 1.4em 0 .4em; }
p, li { max-width: 78em; }
code { font: .88em/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: var(--band);
       padding: .1em .3em; border-radius: 4px; }
blockquote { margin: .8em 0; padding: .6em 1em; border-left: 5px solid var(--accent); background: #ddf4ff;
             border-radius: 0 6px 6px 0; font-size: 1.05em; }
blockquote p { margin: .3em 0; }
table { border-collapse: collapse; margin: .6em 0 1.2em; font-size: .9em; }
th, td { border: 1px solid var(--line); padding: 4px 8px; vertical-align: top; }
th { background: var(--band); text-align: left; font-weight: 600; }
td:first-child { white-space: nowrap; }
td[style*="left"] { overflow-wrap: anywhere; }  /* markdown_table's "w" columns: long setting names */
tbody tr:nth-child(even) { background: #fbfcfd; }
td[style*="right"] { font-variant-numeric: tabular-nums; white-space: nowrap; }
img { max-width: 100%; height: auto; display: block; margin: .4em 0 1em; }
.scroll { overflow-x: auto; }
"""


def markdown_table(header: list[str] | tuple[str, ...], rows: list[list[str]], align: str | None = None) -> list[str]:
    """A Markdown table's lines; ``align`` a letter per column: ``l`` left, ``r`` right (numbers,
    kept on one line), ``w`` left and wrapped anywhere (long names such as broker settings); by
    default the first column left, the others right. Cells are written as given: escape user text
    with :func:`ledgercache.report_common.md_escape`."""
    align = align or "l" + "r" * (len(header) - 1)
    rule = "|" + "".join({"r": "---:|", "w": ":---|"}.get(a, "---|") for a in align)
    return ["| " + " | ".join(header) + " |", rule, *("| " + " | ".join(r) + " |" for r in rows)]


_IMG_SRC = re.compile(r'<img([^>]*?)\ssrc="([^"]+)"')
_MIME = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif"}


def _embed(body: str, base_dir: Path | None) -> str:
    def sub(m: re.Match) -> str:
        attrs, src = m.group(1), html.unescape(m.group(2))
        path = None if base_dir is None or ":" in src or src.startswith("/") else base_dir / src
        mime = _MIME.get(Path(src).suffix.lower())
        if path is None or mime is None or not path.is_file():
            return m.group(0)
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f'<img{attrs} title="{html.escape(src)}" src="data:{mime};base64,{data}"'

    return _IMG_SRC.sub(sub, body)


def html_page(markdown_text: str, title: str, base_dir: str | Path | None = None) -> str:
    """``markdown_text`` rendered (Python-Markdown with tables) into one HTML page with an inline
    stylesheet (:data:`CSS`) and ``title``. Images with a relative path are read from ``base_dir``
    and embedded as ``data:`` URIs (each keeps its file name as its ``title``); without
    ``base_dir``, or for a file that is not there, the link stays as written. Wide tables scroll
    sideways rather than stretch the page."""
    import markdown  # type: ignore[import-untyped]  # the lab extra; no stubs

    body = markdown.markdown(markdown_text, extensions=["tables", "sane_lists", "toc"], output_format="html")
    body = body.replace("<table>", '<div class="scroll"><table>').replace("</table>", "</table></div>")
    body = _embed(body, Path(base_dir) if base_dir is not None else None)
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def write_page(out_dir: str | Path, markdown_text: str, title: str, stem: str = "report") -> Path:
    """Writes ``<stem>.md`` and its :func:`html_page` ``<stem>.html`` (images in ``out_dir``
    embedded) into ``out_dir``; returns the Markdown path."""
    out = Path(out_dir)
    text = markdown_text if markdown_text.endswith("\n") else markdown_text + "\n"
    (out / f"{stem}.md").write_text(text)
    (out / f"{stem}.html").write_text(html_page(text, title, out))
    return out / f"{stem}.md"
