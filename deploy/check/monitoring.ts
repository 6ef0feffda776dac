// Types the Prometheus Operator objects are checked against: the operator's CRD schemas as
// @kubernetes-models/prometheus-operator generates them. typed_literals.py writes each rendered
// ServiceMonitor, PodMonitor and PrometheusRule as a literal of its type, so that `tsc --strict` rejects keys
// the CRD does not define (the API server would drop them without a word).
export type { IServiceMonitor as ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor";
export type { IPrometheusRule as PrometheusRule } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule";
export type { IPodMonitor as PodMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor";
