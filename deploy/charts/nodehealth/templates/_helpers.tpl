{{/*
Labels of every object: Helm's recommended ones, the part-of/component
labels of the kustomize bases, and commonLabels. app.kubernetes.io/name is
the component (what the kustomize bases' pods carry).
Call with (dict "ctx" $ "component" "nodehealth-controller").
*/}}
{{- define "nodehealth.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .component }}
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
The labels of a component's pods: its selector label
(app.kubernetes.io/name, as in the kustomize bases; selectors cannot change
on upgrade), the other labels of every object, and podLabels.
Call with (dict "ctx" $ "component" "nodehealth-controller" "values" .Values.controller).
*/}}
{{- define "nodehealth.podLabels" -}}
{{- $l := include "nodehealth.labels" (dict "ctx" .ctx "component" .component) | fromYaml -}}
{{- $l = merge (deepCopy (.values.podLabels | default dict)) $l -}}
{{ toYaml $l }}
{{- end }}

{{/*
The image of one binary: <repository>:<tag>[@<digest>]. repository
defaults to <image.registry>/nodehealth/<binary> (ghcr.io/nodehealth/<binary>);
tag to image.tag, then v + the chart's appVersion (the tag a release pushes;
an appVersion that already starts with v is taken as it is); a digest pins
the image (the tag stays readable).
Call with (dict "ctx" $ "binary" "nodehealth-controller" "image" .Values.controller.image).
*/}}
{{- define "nodehealth.image" -}}
{{- $v := .ctx.Values.image -}}
{{- $c := .image | default dict -}}
{{- $repo := $c.repository -}}
{{- if not $repo }}
{{- if not $v.registry }}{{ fail "image.registry is empty: set it to the registry your images are in (default ghcr.io); an image name without one is pulled from Docker Hub" }}{{ end -}}
{{- $repo = printf "%s/nodehealth/%s" (trimSuffix "/" $v.registry) .binary -}}
{{- end -}}
{{- $tag := $c.tag | default $v.tag | default (printf "v%s" (trimPrefix "v" .ctx.Chart.AppVersion)) -}}
{{ $repo }}:{{ $tag }}{{ with $c.digest }}@{{ . }}{{ end }}
{{- end }}

{{/*
The environment of a container: the chart's own variables (a list of
EnvVar), except those extraEnv sets, then extraEnv.
Call with (dict "env" (list ...) "extraEnv" .Values.controller.extraEnv).
*/}}
{{- define "nodehealth.env" -}}
{{- $extra := .extraEnv | default list -}}
{{- $names := list -}}
{{- range $extra }}{{ $names = append $names .name }}{{ end -}}
{{- $out := list -}}
{{- range .env }}{{ if not (has .name $names) }}{{ $out = append $out . }}{{ end }}{{ end -}}
{{- $out = concat $out $extra -}}
{{- if $out }}
{{ toYaml $out }}
{{- end }}
{{- end }}

{{/*
The pod's priorityClassName: priorityClass.name, created by the chart when
priorityClass.create, else an existing class; empty: none.
*/}}
{{- define "nodehealth.priorityClassName" -}}
{{- with .priorityClass }}{{ .name | default "" }}{{ end -}}
{{- end }}

{{/*
The objects of a file copied from the kustomize bases (files/, written by
hack/update-chart.sh), each with the chart's labels added and the bases'
namespace nodehealth-system replaced by the release's (the Namespace object
itself left out: helm install --create-namespace creates it). The RBAC and
admission policies are rendered from these files, not rewritten here, so
that `kubectl apply -k deploy/` and this chart grant exactly the same rules.
Call with (dict "ctx" $ "file" "files/controller/rbac.yaml" "component" "..."),
and "annotations" (a dict) to add annotations to every object.
*/}}
{{- define "nodehealth.fromFile" -}}
{{- $ctx := .ctx -}}
{{- $labels := include "nodehealth.labels" (dict "ctx" $ctx "component" .component) | fromYaml -}}
{{- $content := $ctx.Files.Get .file -}}
{{- if not $content }}{{ fail (printf "chart file %s is missing: run hack/update-chart.sh" .file) }}{{ end -}}
{{- /* replace: literal strings of the file to substitute, e.g. the default
readiness taint key by the configured one. */}}
{{- range $old, $new := .replace | default dict }}
{{- $content = replace $old $new $content }}
{{- end }}
{{- /* Usernames of the release's ServiceAccounts in admission policies'
  expressions (the update operator's, which nodehealth-shadow-delete-mid-update
  exempts) follow the release's namespace like the RBAC subjects below. */}}
{{- $content = replace "system:serviceaccount:nodehealth-system:" (printf "system:serviceaccount:%s:" $ctx.Release.Namespace) $content -}}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" $content -1 }}
{{- $obj := fromYaml $doc }}
{{- if $obj }}
{{- if hasKey $obj "Error" }}{{ fail (printf "%s: %s" $.file $obj.Error) }}{{ end }}
{{- $meta := $obj.metadata }}
{{- /* The kustomize bases' nodehealth-system is the release's namespace. */}}
{{- if not (and (eq $obj.kind "Namespace") (eq $meta.name "nodehealth-system")) }}
{{- if eq ($meta.namespace | default "") "nodehealth-system" }}
{{- $_ := set $meta "namespace" $ctx.Release.Namespace }}
{{- end }}
{{- range $obj.subjects | default list }}
{{- if eq (.namespace | default "") "nodehealth-system" }}
{{- $_ := set . "namespace" $ctx.Release.Namespace }}
{{- end }}
{{- end }}
{{- $_ := set $meta "labels" (merge (dict) ($meta.labels | default dict) $labels) }}
{{- with $.annotations }}
{{- $_ := set $meta "annotations" (merge (dict) ($meta.annotations | default dict) .) }}
{{- end }}
---
{{ toYaml $obj }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The tolerations of the readiness taint, both effects, of the key the
controller is configured with (controller.config.taint.key): the chart's own
pods must run on gated nodes whatever the key.
*/}}
{{- define "nodehealth.readinessTolerations" -}}
{{- $key := dig "taint" "key" "nodehealth.io/not-ready" (.Values.controller.config | default dict) -}}
- key: {{ $key }}
  operator: Exists
  effect: NoSchedule
- key: {{ $key }}
  operator: Exists
  effect: NoExecute
{{- end }}

{{/*
A configuration object from values, with apiVersion and kind filled in,
and with "namespace", leaderElection.resourceNamespace unless set.
Call with (dict "config" .Values.controller.config "kind" "NodeHealthControllerConfiguration" "namespace" "...").
*/}}
{{- define "nodehealth.config" -}}
{{- $c := deepCopy (.config | default dict) -}}
{{- $_ := set $c "apiVersion" "config.nodehealth.io/v1alpha1" -}}
{{- $_ := set $c "kind" .kind -}}
{{- /* The leader-election Lease lives in the release's namespace, where the RBAC grants it. */}}
{{- if .namespace }}
{{- $le := $c.leaderElection | default dict }}
{{- if not $le.resourceNamespace }}
{{- $_ := set $le "resourceNamespace" .namespace }}
{{- $_ := set $c "leaderElection" $le }}
{{- end }}
{{- end -}}
{{ toYaml $c }}
{{- end }}

{{/*
The namespace of the controller, the update operator and the uninstall
hook: the release's. Their RBAC and leader-election Leases follow it.
*/}}
{{- define "nodehealth.namespace" -}}
{{ .Release.Namespace }}
{{- end }}

{{/*
Metrics over HTTPS with a cert-manager certificate (monitoring.tls.certManager)
for a component whose serving.metricsAuthentication is Delegated. Given ctx,
component and config: "true" or "".
*/}}
{{- define "nodehealth.metricsCertManager" -}}
{{- if and .ctx.Values.monitoring.tls.certManager.enabled (eq (dig "serving" "metricsAuthentication" "None" (.config | default dict)) "Delegated") }}true{{ end }}
{{- end }}

{{/*
The component's configuration with the certificate files of
monitoring.tls.certManager in serving, when it applies. Given ctx, component
and config: a dict.
*/}}
{{- define "nodehealth.metricsConfig" -}}
{{- $cfg := deepCopy (.config | default dict) }}
{{- if include "nodehealth.metricsCertManager" . }}
{{- $serving := $cfg.serving | default dict }}
{{- $_ := set $serving "tlsCertFile" "/etc/nodehealth-tls/tls.crt" }}
{{- $_ := set $serving "tlsPrivateKeyFile" "/etc/nodehealth-tls/tls.key" }}
{{- $_ := set $cfg "serving" $serving }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/*
The cert-manager Certificate of a component's metrics Service, when
monitoring.tls.certManager applies. Given ctx, component and config.
*/}}
{{- define "nodehealth.metricsCertificate" -}}
{{- if include "nodehealth.metricsCertManager" . }}
{{- $ns := include "nodehealth.namespace" .ctx }}
{{- $cm := .ctx.Values.monitoring.tls.certManager }}
---
# The certificate of /metrics (serving.tlsCertFile): cert-manager renews the
# Secret, and the component serves the renewed pair without a restart.
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: {{ .component }}-metrics
  namespace: {{ $ns }}
  labels:
    {{- include "nodehealth.labels" (dict "ctx" .ctx "component" .component) | nindent 4 }}
spec:
  secretName: {{ .component }}-metrics-tls
  dnsNames:
  - {{ .component }}-metrics.{{ $ns }}.svc
  - {{ .component }}-metrics.{{ $ns }}.svc.cluster.local
  usages: [server auth, digital signature, key encipherment]
  privateKey:
    algorithm: ECDSA
    size: 256
    rotationPolicy: Always
  {{- with $cm.duration }}
  duration: {{ . }}
  {{- end }}
  issuerRef:
    name: {{ required "monitoring.tls.certManager.issuerRef.name: the cert-manager Issuer or ClusterIssuer that signs the metrics certificates" $cm.issuerRef.name }}
    kind: {{ $cm.issuerRef.kind | default "Issuer" }}
    group: {{ $cm.issuerRef.group | default "cert-manager.io" }}
{{- end }}
{{- end }}
