"""Every dashboard query keeps to the fleet-scale rules (issue 28): by cluster, never a line per node.

Usage: dashboard_queries.py [DASHBOARD.json...]   (default: deploy/helm/meshfit/dashboards/*.json)

Reads every PromQL expression of each dashboard (panel targets, annotation queries, the
selectors of `label_values` variables) with a small PromQL lexer, and fails naming the
dashboard, panel and expression when:
  - a series selector lacks the matcher cluster=~"$cluster" (only the `cluster` variable's own
    query may go without it);
  - an `on (...)` or `ignoring (...)` join leaves out `cluster`: two clusters' series of one host
    name or GPU model would be matched with each other, or the join fails on duplicates;
  - a `by (...)` grouping names `hostname` but not `cluster`: nodes of two clusters that share a
    host name would merge into one row;
  - a time series panel draws a line per node (its legend names {{hostname}}, or it groups by
    hostname) without topk or bottomk around it;
  - the dashboard has no `cluster` variable, first after the data source, of several values and
    All, All being `.*` (so that series without the label match, and a Prometheus that sets none
    shows everything), or a link between the dashboards does not carry it (${cluster:queryparam}).
Then checks that it bites: each kind of fault, put into a copy of a dashboard, is found.
"""
import copy
import json
import re
import sys
from pathlib import Path

DEPLOY = Path(__file__).resolve().parent.parent
DASHBOARDS = sorted((DEPLOY / "helm" / "meshfit" / "dashboards").glob("*.json"))
MATCHER = ("cluster", "=~", "$cluster")

TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<range>\[[^\]]*\])
  | (?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<op>==|!=|=~|!~|>=|<=|[-+*/%^<>=])
  | (?P<punct>[{}(),])
""", re.VERBOSE)
# Words that are neither a metric name nor a function: binary operators, modifiers, literals.
KEYWORDS = {"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"}
LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}


def tokens(expr: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(expr):
        m = TOKEN.match(expr, pos)
        if not m:
            raise ValueError(f"cannot read PromQL at {expr[pos:pos + 30]!r}")
        pos = m.end()
        if m.lastgroup != "ws":
            out.append((m.lastgroup, m.group()))
    return out


def unquote(text: str) -> str:
    return text[1:-1] if text[:1] in "\"'`" else text


def parse(expr: str) -> tuple[list[tuple[str, list[tuple[str, str, str]]]], list[tuple[str, list[str]]]]:
    """The expression's series selectors, each (metric name or "", [(label, op, value)]), and its
    label lists, each (by|without|on|ignoring|group_left|group_right, [labels])."""
    toks = tokens(expr)
    selectors, lists = [], []
    i = 0

    def peek(j: int) -> tuple[str, str]:
        return toks[j] if j < len(toks) else ("", "")

    def matchers(j: int) -> tuple[list[tuple[str, str, str]], int]:
        """The matchers of a `{...}` starting at toks[j]; returns them and the index after `}`."""
        found = []
        j += 1
        while peek(j)[1] != "}":
            (kind, label), (_, op), (vkind, value) = peek(j), peek(j + 1), peek(j + 2)
            if kind != "ident" or vkind != "str":
                raise ValueError(f"bad matcher near {label!r} in {expr!r}")
            found.append((label, op, unquote(value)))
            j += 3
            if peek(j)[1] == ",":
                j += 1
        return found, j + 1

    while i < len(toks):
        kind, text = toks[i]
        if kind == "ident" and text in LABEL_LISTS:
            if peek(i + 1)[1] == "(":
                j, labels = i + 2, []
                while peek(j)[1] != ")":
                    if peek(j)[0] == "ident":
                        labels.append(peek(j)[1])
                    j += 1
                lists.append((text, labels))
                i = j + 1
            else:
                i += 1
            continue
        if kind == "ident" and text.lower() not in KEYWORDS and peek(i + 1)[1] != "(" \
                and peek(i + 1)[1] not in ("by", "without"):
            found, i = matchers(i + 1) if peek(i + 1)[1] == "{" else ([], i + 1)
            selectors.append((text, found))
            continue
        if text == "{":
            found, i = matchers(i)
            selectors.append(("", found))
            continue
        i += 1
    return selectors, lists


def variable_query(var: dict) -> str:
    return var["query"]["query"] if isinstance(var["query"], dict) else var["query"]


def queries(board: dict) -> list[tuple[str, str, str]]:
    """(where, expression, panel type) for every PromQL expression of a dashboard."""
    found = []
    for var in board["templating"]["list"]:
        if var["type"] != "query" or var["name"] == "cluster":
            continue
        m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\)\s*", variable_query(var))
        if not m:
            raise SystemExit(f"{board['title']}: variable ${var['name']} is not label_values(selector, label)")
        found.append((f"variable ${var['name']}", m.group(1), ""))
    for annotation in board["annotations"]["list"]:
        if "expr" in annotation:
            found.append((f"annotation {annotation['name']!r}", annotation["expr"], ""))
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            found.append((f"panel {panel['title']!r} target {target['refId']}", target["expr"], panel["type"]))
            if panel["type"] == "timeseries" and "{{hostname}}" in target.get("legendFormat", "").replace(" ", ""):
                found.append((f"panel {panel['title']!r} target {target['refId']} (legend per node)",
                              target["expr"], "per-node-legend"))
    return found


def links(board: dict):
    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k == "url" and isinstance(v, str) and v.startswith("/d/meshfit-"):
                    yield v
                else:
                    yield from walk(v)
        elif isinstance(o, list):
            for v in o:
                yield from walk(v)
    return list(walk(board))


def faults(board: dict) -> list[str]:
    found = []
    query_vars = [v for v in board["templating"]["list"] if v["type"] == "query"]
    cluster = query_vars[0] if query_vars else {}
    if cluster.get("name") != "cluster":
        found.append("the first query variable is not `cluster`")
    else:
        selector = re.fullmatch(r"\s*label_values\((meshfit_\w+),\s*cluster\)\s*", variable_query(cluster))
        want = {"multi": True, "includeAll": True, "allValue": ".*"}
        if not selector or any(cluster.get(k) != v for k, v in want.items()):
            found.append(f"variable $cluster should be label_values(<a meshfit series>, cluster) with {want}")
    for where, expr, kind in queries(board):
        try:
            selectors, lists = parse(expr)
        except ValueError as e:
            found.append(f"{where}: {e}")
            continue
        if not selectors:
            found.append(f"{where}: no series selector in {expr!r}")
        for name, matchers in selectors:
            if MATCHER not in matchers:
                found.append(f"{where}: {name or '{...}'} lacks cluster=~\"$cluster\" in {expr!r}")
        for word, labels in lists:
            if word in ("on", "ignoring") and "cluster" not in labels:
                found.append(f"{where}: `{word} ({', '.join(labels)})` leaves out cluster in {expr!r}")
            if word == "by" and "hostname" in labels and "cluster" not in labels:
                found.append(f"{where}: `by ({', '.join(labels)})` groups by hostname without cluster in {expr!r}")
        per_node = kind == "per-node-legend" or (kind == "timeseries" and any(
            w == "by" and "hostname" in labels for w, labels in lists))
        if per_node and not re.search(r"\b(topk|bottomk)\s*\(", expr):
            found.append(f"{where}: a line per node without topk or bottomk in {expr!r}")
    for url in links(board):
        if "${cluster:queryparam}" not in url:
            found.append(f"link {url} does not pass ${{cluster:queryparam}}")
    return found


def bites(board: dict) -> None:
    """Each kind of fault, put into a copy of a clean dashboard, is found."""
    def first_target(b):
        return next(t for p in b["panels"] for t in p["targets"] if "on (cluster, " in t["expr"])

    mutations = {
        "a selector without the matcher": lambda b: first_target(b).update(
            expr=first_target(b)["expr"].replace('cluster=~"$cluster", ', "", 1)),
        "a join without cluster": lambda b: first_target(b).update(
            expr=first_target(b)["expr"].replace("on (cluster, ", "on (", 1)),
        "a grouping by hostname alone": lambda b: first_target(b).update(
            expr="max by (hostname) (" + first_target(b)["expr"] + ")"),
        "a line per node": lambda b: next(t for p in b["panels"] if p["type"] == "timeseries" for t in p["targets"]
                                          if not re.search(r"\b(topk|bottomk)\(", t["expr"])).update(legendFormat="{{hostname}}"),
        "All not .*": lambda b: b["templating"]["list"][1].pop("allValue"),
        "a link without the cluster": lambda b: b["links"][0].update(url=b["links"][0]["url"].replace(
            "${cluster:queryparam}&", "")),
    }
    for what, mutate in mutations.items():
        bad = copy.deepcopy(board)
        mutate(bad)
        if not faults(bad):
            raise SystemExit(f"dashboard_queries.py found nothing wrong with {what} in {board['title']}")
    # And each matcher of each panel query, taken out on its own, is missed: the lexer sees
    # every selector, nested ones included.
    matcher = 'cluster=~"$cluster"'
    for panel in board["panels"]:
        for target in panel["targets"]:
            parts = target["expr"].split(matcher)
            for k in range(1, len(parts)):
                bad = copy.deepcopy(board)
                expr = matcher.join(parts[:k]) + "@" + matcher.join(parts[k:])
                next(t for p in bad["panels"] if p["title"] == panel["title"] for t in p["targets"]
                     if t["refId"] == target["refId"])["expr"] = re.sub(r"\{@\}|@, |@", "", expr)
                if not faults(bad):
                    raise SystemExit(f"dashboard_queries.py missed matcher {k} taken out of {panel['title']!r} "
                                     f"target {target['refId']} in {board['title']}")


def main(paths: list[Path]) -> None:
    failed = False
    for path in paths:
        board = json.loads(path.read_text())
        found = faults(board)
        for fault in found:
            print(f"{path.name}: {fault}", file=sys.stderr)
        failed |= bool(found)
        if not found:
            bites(board)
            n = len(queries(board))
            print(f"   {path.name}: {n} queries, each selector by cluster=~\"$cluster\", every join on cluster, "
                  f"no per-node line without topk/bottomk; each fault put in a copy, and each matcher taken out, is found", flush=True)
    if failed:
        raise SystemExit("dashboard queries: see above")


if __name__ == "__main__":
    main([Path(p) for p in sys.argv[1:]] or DASHBOARDS)
