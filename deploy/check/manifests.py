"""The chart and the plain manifests: lint, render, validate, compare.

Usage:
  manifests.py check   lint the chart with Helm, render it, validate every object, and diff the
                       plain manifests in deploy/kubernetes against the render
  manifests.py write   regenerate deploy/kubernetes from the chart (after changing the chart)

deploy/kubernetes is the chart rendered with `namespace.create=true`, release and namespace
`meshfit`, less Helm's own bookkeeping labels and its hooks (the `helm test` Pod): the plain manifests are never edited by hand, so
that the two cannot drift apart, and `check` fails when someone forgets to regenerate them.

Helm here is the real engine (Helm's Go SDK through PyPI helm-python-sdk); it needs no cluster.
Built-in kinds are validated with kubernetes-validate --strict against the oldest and newest
Kubernetes the chart supports. kubernetes-validate has no schema for the Prometheus Operator's
CRDs; the ServiceMonitor and PrometheusRule are validated against the operator's CRD schema by
crd_validate.mjs and typed_literals.py + tsc instead (see deploy/check.sh).
"""
import difflib
import json
import shutil
import sys
import tempfile
from pathlib import Path

import helm_python as helm
import kubernetes_validate
import yaml

DEPLOY = Path(__file__).resolve().parent.parent
CHART = DEPLOY / "helm" / "meshfit"
PLAIN = DEPLOY / "kubernetes"
RELEASE = NAMESPACE = "meshfit"
PLAIN_VALUES = {"namespace": {"create": True}}
# kubeVersion in Chart.yaml is >=1.25; kubernetes-validate ships schemas up to its own release.
KUBE_VERSIONS = ("1.25.0", kubernetes_validate.utils.latest_version())
CRD_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
RULES = CHART / "rules" / "meshfit.rules.yaml"
# Labels Helm's release bookkeeping adds; a kubectl-applied object should not claim them.
HELM_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by")
# File order is apply order: `kubectl apply -f deploy/kubernetes/` reads files by name.
FILE_OF_KIND = {
    "Namespace": "00-namespace.yaml",
    "ServiceAccount": "01-serviceaccount.yaml",
    "Service": "02-service.yaml",
    "DaemonSet": "03-daemonset.yaml",
    "ServiceMonitor": "04-servicemonitor.yaml",
    "PrometheusRule": "05-prometheusrule.yaml",
    "ConfigMap": "06-grafana-dashboards.yaml",
}
# Every scrape option of the ServiceMonitor set at once: the render must pass the operator's CRD
# schema (crd_validate.mjs, tsc) and carry each value (chart_options.py).
SERVICE_MONITOR_OPTIONS = {"serviceMonitor": {
    "honorLabels": True,
    "scheme": "https",
    "tlsConfig": {"ca": {"secret": {"name": "meshfit-tls", "key": "ca.crt"}},
                  "serverName": "meshfit", "insecureSkipVerify": False},
    "basicAuth": {"username": {"name": "meshfit-scrape", "key": "user"},
                  "password": {"name": "meshfit-scrape", "key": "password"}},
    "bearerTokenSecret": {"name": "meshfit-scrape", "key": "token"},
    "relabelings": [{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "regex": "(gpu-[a-z]+)-.*",
                     "targetLabel": "pool", "replacement": "$1", "action": "replace"}],
    "metricRelabelings": [{"sourceLabels": ["__name__"], "regex": "meshfit_gpu_nvlink_bytes_total", "action": "drop"}],
    "interval": "1m",
    "scrapeTimeout": "15s",
}}
HEADER = ("# Generated from deploy/helm/meshfit by `deploy/check/manifests.py write` "
          "(namespace.create=true,\n# release and namespace meshfit); edit the chart, not this file.\n")


def say(text: str) -> None:
    print(f"   {text}", flush=True)


def lint() -> None:
    for values in ({}, PLAIN_VALUES):
        report = helm.lint(CHART, values, strict=True, namespace=NAMESPACE)
        findings = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
        if findings:
            raise SystemExit(f"helm lint {CHART} with {values}: {findings}")
        infos = "; ".join(m["error"] for m in report["messages"])
        say(f"helm lint --strict (values {values or 'default'}): no warnings{f' (info: {infos})' if infos else ''}")


def render(values: dict) -> list[dict]:
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    docs = []
    for template in sorted(manifests):
        if template.endswith("/NOTES.txt"):  # what `helm install` prints, not an object
            continue
        docs.extend(d for d in yaml.safe_load_all(manifests[template]) if d)
    return docs


def notes(values: dict) -> str:
    """NOTES.txt rendered: Helm leaves it out of a render, so render a copy under another name."""
    with tempfile.TemporaryDirectory() as tmp:
        chart = Path(tmp) / "meshfit"
        shutil.copytree(CHART, chart)
        (chart / "templates" / "NOTES.txt").rename(chart / "templates" / "notes-check.txt")
        with helm.Chart.load(chart) as loaded:
            return loaded.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)[
                "meshfit/templates/notes-check.txt"]


def is_hook(doc: dict) -> bool:
    """A Helm hook (the `helm test` Pod): Helm runs it on demand; `kubectl apply` would run it once."""
    return "helm.sh/hook" in doc["metadata"].get("annotations", {})


def schema_rejects_unknown_values() -> None:
    """values.schema.json is what stops a misspelt value from being ignored: prove it bites."""
    with helm.Chart.load(CHART) as chart:
        for bad in ({"agent": {"intervall": "6h"}}, {"agent": {"interval": "6 hours"}}):
            try:
                chart.validate_schema(bad)
            except helm.HelmValuesError:
                continue
            raise SystemExit(f"values.schema.json accepted {bad}")
    say("values.schema.json rejects an unknown key and a malformed duration")


def strip_helm_labels(doc: dict) -> dict:
    for meta in (doc.get("metadata", {}), doc.get("spec", {}).get("template", {}).get("metadata", {})):
        for label in HELM_LABELS:
            meta.get("labels", {}).pop(label, None)
    return doc


def key(doc: dict) -> str:
    meta = doc["metadata"]
    return f"{doc['kind']}/{meta.get('namespace', '-')}/{meta['name']}"


def validate(docs: list[dict], origin: str) -> None:
    for doc in docs:
        for version in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.utils.SchemaNotFoundError:
                if doc["kind"] not in CRD_KINDS:
                    raise SystemExit(f"{origin}: no Kubernetes schema for {key(doc)}")
            except kubernetes_validate.ValidationError as e:
                path = ".".join(str(p) for p in e.path)
                raise SystemExit(f"{origin}: {key(doc)} fails kubernetes-validate --strict "
                                 f"against {version}: {path}: {e.message}")
    core = sorted(key(d) for d in docs if d["kind"] not in CRD_KINDS)
    crds = sorted(key(d) for d in docs if d["kind"] in CRD_KINDS)
    say(f"{origin}: kubernetes-validate --strict {' and '.join(KUBE_VERSIONS)}: {', '.join(core)}")
    if crds:
        say(f"{origin}: CRD objects left to the operator schema check: {', '.join(crds)}")


class BlockDumper(yaml.SafeDumper):
    """Writes multi-line strings (rule expressions, dashboard JSON) as `|` blocks, as a person would."""


BlockDumper.add_representer(
    str, lambda dumper, text: dumper.represent_scalar(
        "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None))


def dump(doc: dict) -> str:
    return yaml.dump(doc, Dumper=BlockDumper, sort_keys=False, width=100, allow_unicode=True)


def plain_docs() -> list[dict]:
    docs = []
    for path in sorted(PLAIN.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def write() -> None:
    docs = [strip_helm_labels(d) for d in render(PLAIN_VALUES) if not is_hook(d)]
    for path in PLAIN.glob("*.yaml"):
        path.unlink()
    PLAIN.mkdir(exist_ok=True)
    for doc in docs:
        path = PLAIN / FILE_OF_KIND[doc["kind"]]
        if path.exists():
            raise SystemExit(f"two objects of kind {doc['kind']}: give the second its own file name")
        path.write_text(HEADER + dump(doc))
        print(f"wrote {path.relative_to(DEPLOY.parent)}")


def check(out: Path) -> None:
    lint()
    schema_rejects_unknown_values()
    default = render({})
    validate(default, "chart (default values)")
    rendered = [strip_helm_labels(d) for d in render(PLAIN_VALUES)]
    validate(rendered, "chart (namespace.create=true)")
    chart = [d for d in rendered if not is_hook(d)]
    plain = plain_docs()
    validate(plain, "deploy/kubernetes")
    want = {key(d): dump(d) for d in chart}
    have = {key(d): dump(d) for d in plain}
    if want != have:
        diff = []
        for k in sorted(set(want) | set(have)):
            diff.extend(difflib.unified_diff(have.get(k, "").splitlines(), want.get(k, "").splitlines(),
                                             f"deploy/kubernetes {k}", f"chart {k}", lineterm=""))
        print("\n".join(diff))
        raise SystemExit("deploy/kubernetes differs from the chart: run deploy/check/manifests.py write")
    say(f"deploy/kubernetes equals the chart render, object by object ({len(chart)} objects)")
    # The rendered CRD objects, for the operator schema checks that follow in check.sh.
    out.mkdir(parents=True, exist_ok=True)
    # The PodMonitor with every scrape option, as chart_options.py renders it.
    pod_monitor = {"serviceMonitor": {**SERVICE_MONITOR_OPTIONS["serviceMonitor"], "enabled": False},
                   "podMonitor": {"enabled": True}}
    crds = [d for d in default + chart + render(SERVICE_MONITOR_OPTIONS) + render(pod_monitor)
            if d["kind"] in CRD_KINDS]
    (out / "crd-objects.json").write_text(json.dumps(crds, indent=2))


if __name__ == "__main__":
    if sys.argv[1:] == ["write"]:
        write()
    elif len(sys.argv) == 3 and sys.argv[1] == "check":
        check(Path(sys.argv[2]))
    else:
        raise SystemExit(__doc__)
