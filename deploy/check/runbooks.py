"""Every alert links a runbook that exists: without promtool, from the rule file and the pages.

Usage: runbooks.py

Checks that each alert in deploy/helm/meshfit/rules/meshfit.rules.yaml has a `runbook_url`
annotation of the form BASE/<alert>.md, that deploy/runbooks/<alert>.md exists and its first
line is the title `# <alert>`, that the relative links of every page (to another runbook, or
to a heading of deploy/README.md, anchors as GitHub makes them from headings) resolve, and that
every page under deploy/runbooks is an alert's, so that a renamed or removed alert leaves no
orphaned runbook behind. deploy/README.md's alert table must have one row per alert, with its
severity and its `for:` ("-" for none), and the README's runbook list must name every alert:
an alert added to the rules and not to the table is one operators never hear of.
"""
import re
import sys
from pathlib import Path

import yaml

DEPLOY = Path(__file__).resolve().parent.parent
RULES = DEPLOY / "helm" / "meshfit" / "rules" / "meshfit.rules.yaml"
PAGES = DEPLOY / "runbooks"
BASE = "https://github.com/meshfit/meshfit/blob/main/deploy/runbooks"


def slug(heading: str, seen: dict[str, int]) -> str:
    """GitHub's heading anchor: lower case, punctuation but `-` and `_` dropped, spaces as `-`,
    a repeated anchor suffixed -1, -2..."""
    base = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
    n = seen.get(base, 0)
    seen[base] = n + 1
    return base if n == 0 else f"{base}-{n}"


def anchors(text: str) -> set[str]:
    """The anchors of a Markdown file's headings, outside code fences."""
    found, seen, fence = set(), {}, False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        heading = None if fence else re.match(r"#{1,6} (.+)", line)
        if heading:
            found.add(slug(heading.group(1), seen))
    return found


def broken_links(page: Path) -> list[str]:
    """The relative links of a page whose file or heading does not exist."""
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and (file.is_dir() or anchor not in anchors(file.read_text())):
            broken.append(target)
    return broken


def readme_table(alerts: list[dict]) -> list[str]:
    text = (DEPLOY / "README.md").read_text()
    rows = {}
    for line in text.splitlines():
        row = re.match(r"\| \[`(Meshfit\w+)`\]\(runbooks/\1\.md\) \| (\w+) \| .+ \| (\S+) \|$", line)
        if row:
            rows[row.group(1)] = (row.group(2), row.group(3))
    problems = []
    for rule in alerts:
        name = rule["alert"]
        want = (rule.get("labels", {}).get("severity"), rule.get("for", "-"))
        if name not in rows:
            problems.append(f"deploy/README.md: the alert table has no row for {name}")
        elif rows[name] != want:
            problems.append(f"deploy/README.md: the alert table gives {name} severity and for: {rows[name]}, "
                            f"the rule {want}")
        if f"- [{name}](runbooks/{name}.md)" not in text:
            problems.append(f"deploy/README.md: the runbook list does not name {name}")
    extra = sorted(set(rows) - {r["alert"] for r in alerts})
    if extra:
        problems.append(f"deploy/README.md: the alert table lists alerts the rules lack: {', '.join(extra)}")
    return problems


def main() -> None:
    alerts = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r]
    problems = []
    for rule in alerts:
        name = rule["alert"]
        url = rule.get("annotations", {}).get("runbook_url")
        page = PAGES / f"{name}.md"
        if not url:
            problems.append(f"{name}: no runbook_url annotation")
        elif url != f"{BASE}/{name}.md":
            problems.append(f"{name}: runbook_url {url!r} is not its own page {BASE}/{name}.md")
        if not page.is_file():
            problems.append(f"{name}: no runbook page {page.relative_to(DEPLOY.parent)}")
            continue
        lines = page.read_text().splitlines()
        if not lines or lines[0] != f"# {name}":
            problems.append(f"{page.relative_to(DEPLOY.parent)}: first line is not the title \"# {name}\"")
        for target in broken_links(page):
            problems.append(f"{page.relative_to(DEPLOY.parent)}: link ({target}) leads nowhere")
    problems += readme_table(alerts)
    orphans = sorted({p.stem for p in PAGES.glob("*.md")} - {r["alert"] for r in alerts})
    if orphans:
        problems.append(f"{PAGES.relative_to(DEPLOY.parent)} has pages for no alert: {', '.join(orphans)}")
    if problems:
        raise SystemExit("runbooks:\n  " + "\n  ".join(problems))
    print(f"   {len(alerts)} alerts, each with a runbook_url to its own page under "
          f"{PAGES.relative_to(DEPLOY.parent)}/, titled for it, and a row of deploy/README.md's alert "
          "table with its severity and for:", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 1:
        raise SystemExit(__doc__)
    main()
