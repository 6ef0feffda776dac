{{/* Shared pieces of every object: names and labels are written here once. */}}

{{/* Chart name, or nameOverride. */}}
{{- define "meshfit.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Object name: fullnameOverride, else the release name, suffixed with the chart name when
the release name does not already contain it (`helm install meshfit` gives `meshfit`). */}}
{{- define "meshfit.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "meshfit.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels that select the agent pods; they never change across upgrades. */}}
{{- define "meshfit.selectorLabels" -}}
app.kubernetes.io/name: {{ include "meshfit.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "meshfit.labels" -}}
{{ include "meshfit.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: meshfit
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* metadata of a namespaced object. Takes a dict: root (the chart context) and optionally
name (default: the full name), namespace (default: the release's), labels and annotations. */}}
{{- define "meshfit.metadata" -}}
name: {{ .name | default (include "meshfit.fullname" .root) }}
namespace: {{ .namespace | default .root.Release.Namespace }}
labels:
  {{- include "meshfit.labels" .root | nindent 2 }}
  {{- with .labels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with .annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "meshfit.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "meshfit.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Fabric calibration. Its pods get a name label of their own, `<name>-fabric`, so
that the agent's Service and ServiceMonitor, which select `app.kubernetes.io/name: <name>`,
never pick them up. */}}

{{/* CronJob, Job prefix, headless Service and pod subdomain. Truncated to 40 characters: the
CronJob appends `-<minutes since epoch>` (8 digits) to name each Job and the Indexed Job names
pod i `<job>-<i>`, which must stay a DNS label (63 characters): 40 + 7 + 9 + 4 leaves room for
up to 999 nodes. */}}
{{- define "meshfit.fabric.fullname" -}}
{{- printf "%s-fabric" (include "meshfit.fullname" . | trunc 40 | trimSuffix "-") -}}
{{- end -}}

{{- define "meshfit.fabric.selectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-fabric" (include "meshfit.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: fabric-calibration
{{- end -}}

{{- define "meshfit.fabric.labels" -}}
{{ include "meshfit.fabric.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: meshfit
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "meshfit.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}


{{/* Values that exclude each other, refused by name at render time (the schema cannot
compare two keys). The two ways the agent learns host PIDs: with both, the host's /proc mount
is read for PIDs the pod already shares, and the pod is in neither of the modes deploy/README.md
describes. Both monitors: every agent scraped twice, every series duplicated. */}}
{{- define "meshfit.checkValues" -}}
{{- if and .Values.hostPID .Values.hostProc.enabled -}}
{{- fail "hostPID=true and hostProc.enabled=true are alternatives: set hostPID=false to read the host's /proc mount instead" -}}
{{- end -}}
{{- if and .Values.serviceMonitor.enabled .Values.podMonitor.enabled -}}
{{- fail "serviceMonitor.enabled=true and podMonitor.enabled=true would scrape every agent twice: enable one" -}}
{{- end -}}
{{- end -}}
