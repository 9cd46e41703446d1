{{/*
Labels of every object: Helm's recommended ones, the part-of/component
labels of the kustomize bases, and commonLabels.
Call with (dict "ctx" $ "component" "nodehealth-controller").
*/}}
{{- define "nodehealth.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: nodehealth
app.kubernetes.io/component: {{ .component }}
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The image of one binary: [image.registry/]nodehealth/<binary>:<tag>.
Call with (dict "ctx" $ "binary" "nodehealth-controller").
*/}}
{{- define "nodehealth.image" -}}
{{- $v := .ctx.Values.image -}}
{{- $repo := printf "nodehealth/%s" .binary -}}
{{- if $v.registry }}{{ $repo = printf "%s/%s" (trimSuffix "/" $v.registry) $repo }}{{ end -}}
{{ $repo }}:{{ $v.tag | default .ctx.Chart.AppVersion }}
{{- end }}

{{/*
The objects of a file copied from the kustomize bases (files/, written by
hack/update-chart.sh), each with the chart's labels added. The RBAC and
admission policies are rendered from these files, not rewritten here, so
that `kubectl apply -k deploy/` and this chart grant exactly the same rules.
Call with (dict "ctx" $ "file" "files/controller/rbac.yaml" "component" "...").
*/}}
{{- define "nodehealth.fromFile" -}}
{{- $ctx := .ctx -}}
{{- $labels := include "nodehealth.labels" (dict "ctx" $ctx "component" .component) | fromYaml -}}
{{- $content := $ctx.Files.Get .file -}}
{{- if not $content }}{{ fail (printf "chart file %s is missing: run hack/update-chart.sh" .file) }}{{ end -}}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" $content -1 }}
{{- $obj := fromYaml $doc }}
{{- if $obj }}
{{- if hasKey $obj "Error" }}{{ fail (printf "%s: %s" $.file $obj.Error) }}{{ end }}
{{- $meta := $obj.metadata }}
{{- $_ := set $meta "labels" (merge (dict) ($meta.labels | default dict) $labels) }}
---
{{ toYaml $obj }}
{{- end }}
{{- end }}
{{- end }}

{{/* The tolerations of the readiness taint, both effects. */}}
{{- define "nodehealth.readinessTolerations" -}}
- key: nodehealth.io/not-ready
  operator: Exists
  effect: NoSchedule
- key: nodehealth.io/not-ready
  operator: Exists
  effect: NoExecute
{{- end }}

{{/*
A configuration object from values, with apiVersion and kind filled in.
Call with (dict "config" .Values.controller.config "kind" "NodeHealthControllerConfiguration").
*/}}
{{- define "nodehealth.config" -}}
{{- $c := deepCopy (.config | default dict) -}}
{{- $_ := set $c "apiVersion" "config.nodehealth.io/v1alpha1" -}}
{{- $_ := set $c "kind" .kind -}}
{{ toYaml $c }}
{{- end }}

{{/*
The namespace of the controller and the update operator. The RBAC, the
admission policies and the leader-election Lease name it.
*/}}
{{- define "nodehealth.namespace" -}}
nodehealth-system
{{- end }}
