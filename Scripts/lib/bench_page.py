"""The report's chart (bench/chart.svg), and the report as a page to look at (issue 24): self-contained
HTML, the chart inline, every table of BENCHMARKS.md as an HTML table (bench/index.html, next to the
chart). Called by bench_report.py."""
import html
import os
import re


def write_chart(by, svg_path, fmt):
    """The chart: ratio bars with goal ticks, and writer scaling (`by`: the results by case)."""
    bars = [(n, by[n]["ratio"], g) for n, g in [("save-history", 0.6), ("save-no-history", 0.85), ("batch-insert", 0.5),
                                                  ("update-property", None), ("history-fetch-1k", None), ("history-fetch-1m", None)] if n in by]
    writers = [(n, by["writers-%d" % n]["saves_per_s"]) for n in [1, 2, 4, 8] if "writers-%d" % n in by]
    W, H = 760, 60 + 34 * len(bars) + 60 + 34 * len(writers)
    x0, width = 190, 480
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="13">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="10" y="24" font-size="16" font-weight="bold">SharedStore / raw SQLite (1.0 = free)</text>']
    y = 44
    for i in range(0, 11, 2):
        x = x0 + width * i / 10
        svg.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>' % (x, y - 4, x, y + 34 * len(bars)))
        svg.append('<text x="%.1f" y="%d" text-anchor="middle" fill="#666">%.1f</text>' % (x, y + 34 * len(bars) + 14, i / 10))
    for name, ratio, goal in bars:
        svg.append('<text x="%d" y="%d" text-anchor="end">%s</text>' % (x0 - 8, y + 18, name))
        svg.append('<rect x="%d" y="%d" width="%.1f" height="22" fill="#4a7bd0"/>' % (x0, y + 4, width * min(ratio, 1.0)))
        svg.append('<text x="%.1f" y="%d">%.2f</text>' % (x0 + width * min(ratio, 1.0) + 6, y + 20, ratio))
        if goal:
            gx = x0 + width * goal
            svg.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#d04a4a" stroke-width="3"/>' % (gx, y + 1, gx, y + 29))
        y += 34
    y += 40
    svg.append('<text x="10" y="%d" font-size="16" font-weight="bold">Aggregate saves/s by writer processes (2 cores)</text>' % (y - 8))
    top = max([v for _, v in writers] + [1])
    for n, v in writers:
        svg.append('<text x="%d" y="%d" text-anchor="end">%d writer%s</text>' % (x0 - 8, y + 18, n, "" if n == 1 else "s"))
        svg.append('<rect x="%d" y="%d" width="%.1f" height="22" fill="#5aa469"/>' % (x0, y + 4, width * v / top))
        svg.append('<text x="%.1f" y="%d">%s</text>' % (x0 + width * v / top + 6, y + 20, fmt(v)))
        y += 34
    svg.append('<text x="10" y="%d" fill="#666">red ticks: goals of the benchmark issue</text>' % (H - 8))
    svg.append("</svg>")
    open(svg_path, "w").write("\n".join(svg))


def inline(text):
    text = html.escape(text)
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)


def write_page(out, svg_path):
    """Writes index.html beside `svg_path` from the report's lines `out`."""
    page, table, code = [], [], False
    for line in out:
        for l in line.split("\n"):
            if l.startswith("```"):
                page.append("</pre>" if code else "<pre>")
                code = not code
                continue
            if code:
                page.append(html.escape(l))
                continue
            if l.startswith("|"):
                cells = [c.strip() for c in l.strip("|").split("|")]
                if not all(set(c) <= set("-: ") for c in cells):
                    table.append(cells)
                continue
            if table:
                page.append("<table><tr>" + "".join("<th>%s</th>" % inline(c) for c in table[0]) + "</tr>" +
                            "".join("<tr>" + "".join("<td>%s</td>" % inline(c) for c in r) + "</tr>" for r in table[1:]) +
                            "</table>")
                table = []
            if l.startswith("!["):
                page.append(open(svg_path).read())
            elif l.startswith("#"):
                level = len(l) - len(l.lstrip("#"))
                page.append("<h%d>%s</h%d>" % (level, inline(l.lstrip("# ")), level))
            elif l.startswith("- "):
                page.append("<p>• %s</p>" % inline(l[2:]))
            elif l.strip():
                page.append("<p>%s</p>" % inline(l))
    page_path = os.path.join(os.path.dirname(svg_path), "index.html")
    open(page_path, "w").write(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>SharedStore benchmarks</title>"
        "<style>body{font:14px sans-serif;margin:2em;max-width:72em}td,th{padding:2px 8px;text-align:left;"
        "border-bottom:1px solid #eee}pre{background:#f6f6f6;padding:8px}</style></head><body>\n" +
        "\n".join(page) + "\n</body></html>\n")
