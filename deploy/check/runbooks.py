"""Every alert links a runbook that exists: without promtool, from the rule file and the README.

Usage: runbooks.py

Checks that each alert in deploy/helm/meshfit/rules/meshfit.rules.yaml has a `runbook_url`
annotation of the form BASE#anchor, that the anchor is a heading of deploy/README.md (anchors as
GitHub makes them from headings), and that every subsection of the README's "Runbooks" section
is an alert's, so that a renamed or removed alert leaves no orphaned runbook behind.
"""
import re
import sys
from pathlib import Path

import yaml

DEPLOY = Path(__file__).resolve().parent.parent
RULES = DEPLOY / "helm" / "meshfit" / "rules" / "meshfit.rules.yaml"
README = DEPLOY / "README.md"
BASE = "https://github.com/meshfit/meshfit/blob/main/deploy/README.md"
SECTION = "Runbooks"


def slug(heading: str, seen: dict[str, int]) -> str:
    """GitHub's heading anchor: lower case, punctuation but `-` and `_` dropped, spaces as `-`,
    a repeated anchor suffixed -1, -2..."""
    base = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
    n = seen.get(base, 0)
    seen[base] = n + 1
    return base if n == 0 else f"{base}-{n}"


def headings(text: str) -> tuple[set[str], list[str]]:
    """All anchors of the README, and the `###` headings inside its Runbooks section."""
    anchors, seen, runbooks, inside = set(), {}, [], False
    fence = False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        found = None if fence else re.match(r"(#{1,6}) (.+)", line)
        if not found:
            continue
        level, title = len(found.group(1)), found.group(2)
        anchors.add(slug(title, seen))
        if level == 2:
            inside = title.strip() == SECTION
        elif level == 3 and inside:
            runbooks.append(title.strip())
    return anchors, runbooks


def main() -> None:
    anchors, runbooks = headings(README.read_text())
    if slug(SECTION, {}) not in anchors:
        raise SystemExit(f"{README}: no \"## {SECTION}\" section")
    alerts = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r]
    problems = []
    for rule in alerts:
        name = rule["alert"]
        url = rule.get("annotations", {}).get("runbook_url")
        if not url:
            problems.append(f"{name}: no runbook_url annotation")
            continue
        page, _, anchor = url.partition("#")
        if page != BASE or not anchor:
            problems.append(f"{name}: runbook_url {url!r} is not {BASE}#<anchor>")
        elif anchor not in anchors:
            problems.append(f"{name}: runbook_url anchor #{anchor} is no heading of {README.name}")
        elif anchor != slug(name, {}):
            problems.append(f"{name}: runbook_url anchor #{anchor} is not the alert's own section #{slug(name, {})}")
    orphans = sorted(set(runbooks) - {r["alert"] for r in alerts})
    if orphans:
        problems.append(f"{README.name} \"{SECTION}\" has sections for no alert: {', '.join(orphans)}")
    if problems:
        raise SystemExit("runbooks:\n  " + "\n  ".join(problems))
    print(f"   {len(alerts)} alerts, each with a runbook_url to its own section of "
          f"{README.relative_to(DEPLOY.parent)}#{slug(SECTION, {})}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 1:
        raise SystemExit(__doc__)
    main()
