"""Draws each dashboard to a PNG from the query results e2e.py saved, the way Grafana lays it out.

Usage: render_dashboards.py PANELS_JSON OUT_DIR

No Grafana server can be installed here, so this stands in for one: it places panels on
Grafana's 24-column grid (repeated panels side by side, as Grafana repeats them), applies the
table transformations the dashboards use (merge, groupingToMatrix, convertFieldType, organize,
sortBy, calculateField), and draws timeseries as lines (stacked where the panel stacks) with the
dashboard's Prometheus annotations as vertical marks, heatmaps as one row per series, tables
with their units, value mappings and cell colours (as many rows as the panel's height holds, as
Grafana shows before scrolling), and "No data" where a query returned nothing. It draws what the
queries returned; it is not pixel-for-pixel Grafana.
"""
import json
import math
import re
import sys
from datetime import datetime
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import matplotlib.ticker  # noqa: E402
from matplotlib import colormaps, colors  # noqa: E402

COLUMN_IN, ROW_IN = 0.78, 0.36
BACKGROUND, PANEL, TEXT, GRID = "#111217", "#181b1f", "#ccccdc", "#2c3235"
GRAFANA_COLORS = {"green": "#73bf69", "red": "#f2495c", "orange": "#ff9830", "yellow": "#fade2a", "blue": "#5794f2",
                  "text": TEXT}
SI = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, "")]
IEC = [(2 ** 40, "TiB"), (2 ** 30, "GiB"), (2 ** 20, "MiB"), (2 ** 10, "KiB"), (1, "B")]
MAX_LEGEND = 10
# Grafana's grid row is 30 px plus an 8 px gap; a small table row 25 px, the title and the
# header taking the rest.
GRID_ROW_PX, TABLE_ROW_PX, TABLE_CHROME_PX = 38, 25, 70


def natural(text: str):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(text))]


def sort_key(value):
    """Sort key of a table cell: numbers by value before text in natural order, empty last."""
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
        return (0, value, [])
    return (1, 0, natural(value)) if value not in (None, "") else (2, 0, [])


# Grafana unit ids drawn with SI prefixes, and those drawn as a plain number with a suffix.
SI_UNITS = {"Bps": "B/s", "flops": "FLOP/s", "hertz": "Hz"}
UNIT_SUFFIX = {"watt": "W", "celsius": "°C"}


def fmt(value, unit: str | None, decimals: int | None = None) -> str:
    """A value as Grafana shows it in `unit` (Grafana's unit ids; SI for rates, as design.md says)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, str):
        return value
    d = 1 if decimals is None else decimals
    if unit == "percentunit":
        return f"{value * 100:.{d}f}%"
    if unit == "bytes":
        scale, name = next(((s, n) for s, n in IEC if abs(value) >= s), IEC[-1])
        return f"{value / scale:.{d if value % scale else 0}f} {name}"
    if unit in UNIT_SUFFIX:
        return f"{value:.{decimals if decimals is not None else 0}f} {UNIT_SUFFIX[unit]}"
    if unit == "s":
        for seconds, name in ((86400, "day"), (3600, "hour"), (60, "min")):
            if abs(value) >= seconds:
                return f"{value / seconds:.1f} {name}"
        return f"{value:.{d}f} s"
    suffix = SI_UNITS.get(unit)
    if suffix:
        scale, prefix = next(((s, p) for s, p in SI if abs(value) >= s), SI[-1])
        return f"{value / scale:.{d}f} {prefix}{suffix}"
    return f"{value:.{decimals}f}" if decimals is not None else f"{value:g}"


def legend(template: str, metric: dict) -> str:
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: metric.get(m.group(1), ""), template or "") or str(metric)


# ---------- tables: Grafana's data frames and transformations ----------

def frames(panel: dict, targets: list[dict]) -> list[dict]:
    single = len(targets) == 1
    out = []
    for target in targets:
        value = "Value" if single else f"Value #{target['refId']}"
        labels = sorted({k for s in target["data"] for k in s["metric"] if k != "__name__"}, key=natural)
        rows = [dict({"Time": float(s["value"][0])}, **{k: s["metric"].get(k, "") for k in labels},
                     **{value: float(s["value"][1])}) for s in target["data"]]
        out.append({"columns": ["Time", *labels, value], "rows": rows})
    return out


def merge(fs: list[dict]) -> dict:
    columns, merged = [], {}
    for f in fs:
        columns += [c for c in f["columns"] if c not in columns]
        for row in f["rows"]:
            key = tuple((k, v) for k, v in row.items() if k != "Time" and not k.startswith("Value"))
            merged.setdefault(key, {}).update(row)
    return {"columns": columns, "rows": list(merged.values())}


def transform(frame: dict, step: dict) -> dict:
    kind, opt = step["id"], step["options"]
    cols, rows = frame["columns"], frame["rows"]
    if kind == "organize":
        cols = [c for c in cols if not opt.get("excludeByName", {}).get(c)]
        order = opt.get("indexByName", {})
        cols.sort(key=lambda c: order.get(c, len(order)))
        rename = opt.get("renameByName", {})
        rows = [{rename.get(k, k): v for k, v in r.items() if k in cols} for r in rows]
        return {"columns": [rename.get(c, c) for c in cols], "rows": rows}
    if kind == "groupingToMatrix":
        corner = f"{opt['rowField']}\\{opt['columnField']}"
        # Columns in the order the values first appear, as Grafana does.
        keys = list(dict.fromkeys(r[opt["columnField"]] for r in rows))
        matrix = {}
        for r in rows:
            matrix.setdefault(r[opt["rowField"]], {corner: r[opt["rowField"]]})[r[opt["columnField"]]] = r[opt["valueField"]]
        return {"columns": [corner, *keys], "rows": [matrix[k] for k in sorted(matrix, key=natural)]}
    if kind == "convertFieldType":
        for conversion in opt["conversions"]:
            for r in rows:
                r[conversion["targetField"]] = float(r[conversion["targetField"]])
        return frame
    if kind == "sortBy":
        (sort,) = opt["sort"]
        return {"columns": cols, "rows": sorted(rows, key=lambda r: sort_key(r.get(sort["field"])), reverse=sort.get("desc", False))}
    if kind == "calculateField":
        b = opt["binary"]
        left, right = b["left"]["matcher"]["options"], b["right"]["matcher"]["options"]
        for r in rows:
            r[opt["alias"]] = r[left] / r[right] if r.get(right) else None
        return {"columns": [*cols, opt["alias"]], "rows": rows}
    raise SystemExit(f"render: transformation {kind} is not drawn here; add it to transform()")


def field_config(panel: dict, name: str) -> dict:
    config = {k: v for k, v in panel["fieldConfig"]["defaults"].items()}
    config["cellOptions"] = config.get("custom", {}).get("cellOptions", {"type": "auto"})
    for override in panel["fieldConfig"]["overrides"]:
        if override["matcher"]["id"] == "byName" and override["matcher"]["options"] == name:
            for prop in override["properties"]:
                config["cellOptions" if prop["id"] == "custom.cellOptions" else prop["id"]] = prop["value"]
    return config


def threshold_color(value: float, thresholds: dict) -> str:
    color = thresholds["steps"][0]["color"]
    for step in thresholds["steps"][1:]:
        if value >= step["value"]:
            color = step["color"]
    return GRAFANA_COLORS.get(color, color)


def cell(value, config: dict, numbers: list[float]) -> tuple[str, str | None, str | None]:
    """Text, background and text colour of one table cell; `numbers` are all the table's
    numbers, the range Grafana scales continuous colours to when a field sets no min or max."""
    kind = config["cellOptions"]["type"]
    for mapping in config.get("mappings", []):
        hit = mapping["options"].get(fmt(value, None, 0) if isinstance(value, float) else str(value))
        if hit:
            color = GRAFANA_COLORS.get(hit.get("color"), hit.get("color"))
            return (hit.get("text", str(value)), color if kind == "color-background" else None,
                    color if kind == "color-text" else None)
    text = fmt(value, config.get("unit"), config.get("decimals"))
    if kind not in ("color-background", "color-text") or not isinstance(value, float):
        return text, None, None
    mode = config.get("color", {}).get("mode", "thresholds")
    if mode == "thresholds":
        color = threshold_color(value, config["thresholds"])
    elif mode == "fixed":
        fixed = config["color"]["fixedColor"]
        color = GRAFANA_COLORS.get(fixed, fixed)
    else:
        low, high = config.get("min", min(numbers)), config.get("max", max(numbers))
        scale = {"continuous-RdYlGr": "RdYlGn", "continuous-GrYlRd": "RdYlGn_r"}[mode]
        color = colors.to_hex(colormaps[scale](0.5 if high == low else (value - low) / (high - low)), keep_alpha=False)
    return (text, color, None) if kind == "color-background" else (text, None, color)


def no_data(ax) -> None:
    ax.text(0.5, 0.5, "No data", color=TEXT, fontsize=10, ha="center", va="center", transform=ax.transAxes)
    ax.axis("off")


def draw_table(ax, panel: dict, targets: list[dict], board: dict) -> None:
    frame = merge(frames(panel, targets))
    for step in panel.get("transformations", []):
        if step["id"] != "merge":
            frame = transform(frame, step)
    if not frame["rows"]:
        no_data(ax)
        return
    cols = frame["columns"]
    headers = [field_config(panel, c).get("displayName", c) for c in cols]
    sort = panel["options"].get("sortBy") or []
    if sort and sort[0]["displayName"] in headers:
        name = cols[headers.index(sort[0]["displayName"])]
        frame["rows"].sort(key=lambda r: sort_key(r.get(name)), reverse=sort[0]["desc"])
    fits = max(1, (panel["gridPos"]["h"] * GRID_ROW_PX - TABLE_CHROME_PX) // TABLE_ROW_PX)
    rows = frame["rows"][:fits]
    numbers = [v for r in frame["rows"] for v in r.values() if isinstance(v, float)]
    texts, fills, inks = [], [], []
    for r in rows:
        line, line_fill, line_ink = [], [], []
        for c in cols:
            text, fill, ink = cell(r.get(c), field_config(panel, c), numbers)
            line.append(text)
            line_fill.append(fill or PANEL)
            line_ink.append(ink)
        texts.append(line)
        fills.append(line_fill)
        inks.append(line_ink)
    # Rows of Grafana's height from the top of the panel down, however many there are.
    tall = (len(rows) + 1) / (fits + 1)
    table = ax.table(cellText=texts, cellColours=fills, colLabels=headers, bbox=(0, 1 - tall, 1, tall), cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(7)
    for (row, col), c in table.get_celld().items():
        c.set_edgecolor(GRID)
        ink = inks[row - 1][col] if row > 0 else None
        filled = row > 0 and c.get_facecolor()[:3] != colors.to_rgb(PANEL)
        c.get_text().set_color(ink or ("#000000" if filled else TEXT))
        if row == 0:
            c.set_facecolor("#22252b")
    if len(frame["rows"]) > fits:
        ax.text(1.0, 1.06, f"{fits} of {len(frame['rows'])} rows (scrolls)", color=TEXT, fontsize=7, ha="right",
                transform=ax.transAxes)
    ax.axis("off")


# ---------- timeseries and heatmap ----------

def unit_scale(values: list[float], unit: str | None) -> tuple[float, str]:
    top = max((abs(v) for v in values), default=0)
    suffix = SI_UNITS.get(unit)
    if not suffix:
        return 1, {"percentunit": "", "none": ""}.get(unit, UNIT_SUFFIX.get(unit, unit or ""))
    scale, prefix = next(((s, p) for s, p in SI if top >= s), SI[-1])
    return scale, prefix + suffix


def series(panel: dict, targets: list[dict]):
    by_ref = {t["refId"]: t for t in panel["targets"]}
    for target in targets:
        for s in target["data"]:
            times = [datetime.fromtimestamp(float(t)) for t, _ in s["values"]]
            yield legend(by_ref[target["refId"]].get("legendFormat"), s["metric"]), times, [float(v) for _, v in s["values"]]


def annotate(ax, board: dict) -> None:
    """Each annotation query's events in its colour, as Grafana draws them: a series' points one
    query step apart merge into one region, shaded, marked where it starts."""
    for result in board.get("annotations", []):
        color = result["annotation"]["iconColor"]
        for s in result["data"]:
            times = [float(t) for t, _ in s["values"]]
            step = min((b - a for a, b in zip(times, times[1:])), default=0)
            regions = [[times[0], times[0]]] if times else []
            for t in times[1:]:
                if t - regions[-1][1] <= step:
                    regions[-1][1] = t
                else:
                    regions.append([t, t])
            for start, end in regions:
                ax.axvline(datetime.fromtimestamp(start), color=color, lw=0.8, alpha=0.8, ls="--")
                if end > start:
                    ax.axvspan(datetime.fromtimestamp(start), datetime.fromtimestamp(end), color=color, alpha=0.12, lw=0)


def draw_timeseries(ax, panel: dict, targets: list[dict], board: dict) -> None:
    lines = sorted(series(panel, targets), key=lambda s: natural(s[0]))
    if not lines:
        no_data(ax)
        return
    defaults = panel["fieldConfig"]["defaults"]
    unit = defaults.get("unit")
    custom = defaults["custom"]
    stacked = custom.get("stacking", {}).get("mode") == "normal"
    scale, label = unit_scale([v for _, _, ys in lines for v in ys], unit)
    bars = custom.get("drawStyle") == "bars"
    base: dict = {}
    for n, (name, times, ys) in enumerate(lines):
        color = colormaps["tab20"](n % 20)
        values = [y / scale for y in ys]
        if stacked:
            low = [base.get(t, 0.0) for t in times]
            values = [lo + v for lo, v in zip(low, values)]
            ax.fill_between(times, low, values, step="post", color=color, alpha=0.6, lw=0)
            base.update(zip(times, values))
        ax.plot(times, values, lw=1, drawstyle="steps-post" if bars or stacked else "default",
                label=name if n < MAX_LEGEND else None, color=color)
    annotate(ax, board)
    ax.set_ylabel(label, color=TEXT, fontsize=7)
    if unit == "percentunit":
        ax.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    top = defaults["max"] * 1.05 if "max" in defaults else (None if any(y for _, _, ys in lines for y in ys) else 1)
    ax.set_ylim(bottom=0 if defaults.get("min") == 0 else None, top=top)
    ax.xaxis.set_major_formatter(matplotlib.dates.DateFormatter("%H:%M:%S"))
    handles = ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False, labelcolor=TEXT,
                        title=f"{len(lines)} series" + (f", first {MAX_LEGEND}" if len(lines) > MAX_LEGEND else ""))
    handles.get_title().set_color(TEXT)
    handles.get_title().set_fontsize(6)


def draw_heatmap(ax, panel: dict, targets: list[dict], board: dict) -> None:
    rows = sorted(series(panel, targets), key=lambda s: natural(s[0]))
    unit = panel["fieldConfig"]["defaults"].get("unit")
    scale, label = unit_scale([v for _, _, ys in rows for v in ys], unit)
    width = min(len(ys) for _, _, ys in rows)
    grid = [[y / scale for y in ys[-width:]] for _, _, ys in rows]
    times = rows[0][1][-width:]
    image = ax.imshow(grid, aspect="auto", cmap=panel["options"]["color"]["scheme"].lower(), vmin=0, interpolation="nearest",
                      extent=(matplotlib.dates.date2num(times[0]), matplotlib.dates.date2num(times[-1]), len(rows) - 0.5, -0.5))
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([name for name, _, _ in rows], fontsize=4.5)
    ax.xaxis_date()
    ax.xaxis.set_major_formatter(matplotlib.dates.DateFormatter("%H:%M:%S"))
    bar = plt.colorbar(image, ax=ax, fraction=0.05, pad=0.02)
    bar.set_label(label, color=TEXT, fontsize=7)
    bar.ax.tick_params(colors=TEXT, labelsize=6)


DRAW = {"timeseries": draw_timeseries, "table": draw_table, "heatmap": draw_heatmap}


def layout(instances: list[dict]) -> list[tuple[dict, tuple[int, int, int, int]]]:
    """Grafana's grid: a repeated panel's copies share its row, each 24/count wide (at least
    24/maxPerRow), wrapping onto new rows that push the panels below down."""
    placed, pushes, copies_of = [], [], {}
    for inst in instances:
        copies_of.setdefault(inst["panel"]["id"], []).append(inst)
    for copies in sorted(copies_of.values(), key=lambda c: (c[0]["panel"]["gridPos"]["y"], c[0]["panel"]["gridPos"]["x"])):
        panel = copies[0]["panel"]
        g = panel["gridPos"]
        y = g["y"] + sum(extra for below, extra in pushes if g["y"] >= below)
        per_row = min(len(copies), panel.get("maxPerRow", 4)) if panel.get("repeat") else 1
        width = 24 // per_row if panel.get("repeat") else g["w"]
        for n, copy in enumerate(copies):
            x = (g["x"] if not panel.get("repeat") else 0) + (n % per_row) * width
            placed.append((copy, (x, y + (n // per_row) * g["h"], width, g["h"])))
        pushes.append((g["y"] + g["h"], (math.ceil(len(copies) / per_row) - 1) * g["h"]))
    return placed


def render(board: dict, path: Path) -> None:
    placed = layout(board["panels"])
    rows = max(y + h for _, (_, y, _, h) in placed)
    fig = plt.figure(figsize=(24 * COLUMN_IN, (rows + 2) * ROW_IN), facecolor=BACKGROUND)
    fig.text(0.01, 1 - 0.6 / (rows + 2), board["title"], color=TEXT, fontsize=14, weight="bold")
    top = 1 - 1.6 / (rows + 2)
    for inst, (x, y, w, h) in placed:
        left, width = x / 24, w / 24
        bottom, height = top - (y + h) / (rows + 2), h / (rows + 2)
        frame = fig.add_axes((left + 0.003, bottom + 0.003, width - 0.006, height - 0.006))
        frame.set_facecolor(PANEL)
        frame.set_xticks([])
        frame.set_yticks([])
        for spine in frame.spines.values():
            spine.set_color(GRID)
        frame.set_title(inst["title"], color=TEXT, fontsize=8, loc="left", pad=-12, x=0.01)
        kind = inst["panel"]["type"]
        if kind == "table":
            ax = fig.add_axes((left + width * 0.02, bottom + height * 0.04, width * 0.96, height * 0.84))
        else:
            pad_right = 0.16 if kind == "timeseries" else 0.02
            ax = fig.add_axes((left + width * 0.06, bottom + height * 0.12, width * (0.92 - pad_right), height * 0.68))
        ax.set_facecolor(PANEL)
        ax.tick_params(colors=TEXT, labelsize=6)
        for spine in ax.spines.values():
            spine.set_color(GRID)
        DRAW[kind](ax, inst["panel"], inst["targets"], board)
    fig.savefig(path, dpi=80, facecolor=BACKGROUND)
    plt.close(fig)


def main(panels_json: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for board in json.loads(panels_json.read_text()):
        path = out / (Path(board["file"]).stem + ".png")
        render(board, path)
        print(f"   {board['title']}: {len(board['panels'])} panels drawn to {path}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
