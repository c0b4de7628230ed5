"""What the notebooks display: rounded, labelled tables; notes with their line breaks; figures; a banner.

One import instead of helpers copied into every notebook. Tables go out as HTML (a pandas Styler):
floats rounded, dicts and lists written as `key: value` text, line breaks kept (`white-space:
pre-wrap`), the title as the caption, so they read the same in JupyterLab, an executed copy and its
nbconvert HTML. Figures are PNG files a study wrote, or matplotlib figures drawn for display only.
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

DIGITS = 3  # decimals of a float cell: enough for an accuracy (0.567) and a p-value (0.0009 -> 0.001)
SMALL = 1e-3  # below this a float is written in scientific notation, so p = 2e-08 does not read 0.0


def cell_text(value: Any, digits: int = DIGITS) -> str:
    """One cell as a reader wants it: 0.5666666 -> 0.567, 3.3e-06 -> 3.3e-06, {'a': 1} -> 'a: 1'."""
    if value is None or value is pd.NA or (isinstance(value, float) and pd.isna(value)):
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if value == int(value) and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.2g}" if abs(value) < SMALL else f"{value:.{digits}f}".rstrip("0").rstrip(".")
    if isinstance(value, Mapping):
        return "\n".join(f"{key}: {cell_text(item, digits)}" for key, item in value.items())
    if isinstance(value, list | tuple):
        return "; ".join(cell_text(item, digits) for item in value)
    return str(value)


def table_html(frame: pd.DataFrame, title: str | None = None, digits: int = DIGITS) -> str:
    """The HTML of a labelled table: escaped cells, line breaks kept, the title as its caption."""
    head = "".join(f"<th>{html.escape(str(column))}</th>" for column in frame.columns)
    rows = []
    for row in frame.itertuples(index=False):
        cells = "".join(f"<td>{html.escape(cell_text(value, digits))}</td>" for value in row)
        rows.append(f"<tr>{cells}</tr>")
    caption = (
        f"<caption style='caption-side:top;text-align:left;font-weight:bold'>{html.escape(title)}</caption>"
        if title
        else ""
    )
    return (
        "<table class='supersede-table' style='border-collapse:collapse'>"
        f"{caption}<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        "<style>.supersede-table td,.supersede-table th{white-space:pre-wrap;text-align:left;"
        "vertical-align:top;padding:2px 8px;border-bottom:1px solid #ddd}</style>"
    )


class Shown:
    """A displayable with HTML for notebooks and plain text for terminals and text-only copies."""

    def __init__(self, html_text: str, plain: str) -> None:
        self.html_text, self.plain = html_text, plain

    def _repr_html_(self) -> str:
        return self.html_text

    def __repr__(self) -> str:
        return self.plain


def show(frame: pd.DataFrame, title: str | None = None, *, digits: int = DIGITS) -> None:
    """Display a DataFrame as a rounded, labelled table (nothing for an empty one but its title)."""
    from IPython.display import display

    if frame is None or frame.empty:
        display(Shown(f"<p><b>{html.escape(title or '')}</b>: (no rows)</p>", f"{title}: (no rows)"))
        return
    plain = frame.map(lambda value: cell_text(value, digits)).to_string(index=False)
    display(Shown(table_html(frame, title, digits), f"{title}\n{plain}" if title else plain))


def show_figure(figure: Any) -> None:
    """Display a PNG path a study wrote, or a matplotlib Figure drawn for display (then closed)."""
    from IPython.display import Image, display

    if isinstance(figure, str | os.PathLike):
        display(Image(filename=str(Path(figure))))
        return
    import matplotlib.pyplot as plt

    display(figure)
    plt.close(figure)


def show_notes(notes: str, title: str = "Notes") -> None:
    """The agent's notes as written, line breaks and all."""
    from IPython.display import display

    body = html.escape(notes) if notes else "<i>(empty)</i>"
    display(
        Shown(
            f"<p><b>{html.escape(title)}</b></p><pre style='white-space:pre-wrap;background:#f6f6f6;"
            f"padding:6px'>{body}</pre>",
            f"{title}:\n{notes or '(empty)'}",
        )
    )


def banner(headline: str, details: str = "") -> Shown:
    """A large, plain heading (which profile ran) with a line of details under it."""
    return Shown(
        "<div style='border-left:6px solid #1565c0;padding:6px 12px;margin:6px 0;background:#eef4fb'>"
        f"<div style='font-size:1.6em;font-weight:bold'>{html.escape(headline)}</div>"
        f"<div>{html.escape(details)}</div></div>",
        f"=== {headline} ===",
    )


def show_values(values: Mapping[str, Any] | None, title: str) -> None:
    """A dict (a test's b, c and p, a run's settings) as a two-column table instead of a raw dict."""
    frame = pd.DataFrame({"": list(values or {}), "value": list((values or {}).values())})
    show(frame, title)


def run_warnings_box(warnings: Sequence[str]) -> Shown:
    """Run warnings (retries, timeouts, failed questions, cut or empty replies, a bypassed cache) in a
    box of their own, or one line saying there were none: a reader of a notebook sees them beside the
    tables, not only in the log lines that scrolled past while it ran."""
    if not warnings:
        return Shown(
            "<p style='color:#2e7d32'>Run warnings: none (no retries, timeouts, failed questions, cut or "
            "empty replies).</p>",
            "Run warnings: none",
        )
    items = "".join(f"<li>{html.escape(warning)}</li>" for warning in warnings)
    return Shown(
        "<div style='border-left:6px solid #e65100;padding:6px 12px;margin:6px 0;background:#fff3e0'>"
        f"<b>Run warnings ({len(warnings)})</b><ul>{items}</ul></div>",
        "Run warnings:\n" + "\n".join(f"- {warning}" for warning in warnings),
    )
