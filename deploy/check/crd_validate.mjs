// Validates the rendered ServiceMonitor, PodMonitor and PrometheusRule objects against the Prometheus
// Operator's CRD schemas (types, required fields, enums, patterns), as compiled by
// @kubernetes-models/prometheus-operator. Unknown keys are caught by tsc (typed_literals.py):
// these schemas, like the API server, would only prune them.
// Usage: node crd_validate.mjs CRD_OBJECTS.json
import { readFileSync } from "node:fs";
import { PrometheusRule } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule";
import { ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor";
import { PodMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor";

const models = { PrometheusRule, ServiceMonitor, PodMonitor };
const objects = JSON.parse(readFileSync(process.argv[2], "utf8"));
let failed = 0;
for (const object of objects) {
  const name = `${object.kind}/${object.metadata.namespace}/${object.metadata.name}`;
  try {
    new models[object.kind](object).validate();
    console.log(`   ${name}: valid against the operator's CRD schema`);
  } catch (error) {
    failed += 1;
    console.error(`${name}: ${error.message}`);
  }
}
if (objects.length === 0 || failed > 0) {
  console.error(`crd_validate: ${failed} of ${objects.length} objects failed`);
  process.exit(1);
}
