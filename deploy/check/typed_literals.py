"""Writes TypeScript files that hold deploy/'s JSON and CRD objects as typed literals.

Usage: typed_literals.py OUT_DIR DASHBOARD.json... -- CRD_OBJECTS.json

`tsc --strict` over OUT_DIR then checks every dashboard against grafana.ts (Grafana's schema)
and every ServiceMonitor and PrometheusRule against monitoring.ts (the operator's CRD schema).
A JSON object literal is valid TypeScript, and assigning it to a declared type makes the compiler
reject keys the type does not have, which a cast or a JSON import would let through.
"""
import json
import re
import sys
from pathlib import Path
PANEL_TYPES = {"timeseries": "TimeseriesPanel", "heatmap": "HeatmapPanel", "table": "TablePanel"}
CRD_TYPES = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}


def ident(text: str) -> str:
    return re.sub(r"\W", "_", text)


def dashboard_module(path: Path) -> str:
    board = json.loads(path.read_text())
    lines = [f"// {path.name}, as typed literals.", 'import type * as g from "./grafana";', ""]
    names = []
    for panel in board.get("panels", []):
        kind = PANEL_TYPES.get(panel.get("type"))
        if kind is None:
            raise SystemExit(f"{path}: panel {panel.get('title')!r} has type {panel.get('type')!r}; "
                             f"expected one of {', '.join(PANEL_TYPES)}")
        name = f"panel_{panel['id']}"
        names.append(name)
        lines.append(f"// {panel.get('title')}")
        lines.append(f"const {name}: g.{kind} = {json.dumps(panel, indent=2)};")
    rest = dict(board, panels="@@PANELS@@")
    body = json.dumps(rest, indent=2).replace('"@@PANELS@@"', "[" + ", ".join(names) + "]")
    lines.append(f"export const {ident(path.stem)}: g.Dashboard = {body};")
    return "\n".join(lines) + "\n"


def crd_module(path: Path) -> str:
    lines = ['import type * as m from "./monitoring";', ""]
    for n, doc in enumerate(json.loads(path.read_text())):
        if doc["kind"] not in CRD_TYPES:
            raise SystemExit(f"{path}: {doc['kind']} is not one of {', '.join(sorted(CRD_TYPES))}")
        lines.append(f"// {doc['kind']} {doc['metadata']['name']}")
        lines.append(f"export const object_{n}: m.{doc['kind']} = {json.dumps(doc, indent=2)};")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    out = Path(argv[0])
    split = argv.index("--")
    dashboards = [Path(p) for p in argv[1:split]]
    (crd_objects,) = [Path(p) for p in argv[split + 1:]]
    out.mkdir(parents=True, exist_ok=True)
    for path in dashboards:
        (out / f"dashboard_{ident(path.stem)}.ts").write_text(dashboard_module(path))
    (out / "monitoring_objects.ts").write_text(crd_module(crd_objects))


if __name__ == "__main__":
    main(sys.argv[1:])
