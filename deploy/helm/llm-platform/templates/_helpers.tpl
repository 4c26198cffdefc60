{{/* Names and labels shared by the templates. */}}
{{- define "llm.gateway" -}}{{ .Release.Name }}-llm-gateway{{- end -}}
{{- define "llm.processor" -}}{{ .Release.Name }}-session-processor{{- end -}}

{{- define "llm.labels" -}}
app.kubernetes.io/part-of: llm-platform
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{/* The selector of one service's pods: `include "llm.selector" (list . "llm-gateway")`. */}}
{{- define "llm.selector" -}}
app.kubernetes.io/name: {{ index . 1 }}
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
{{- end -}}

{{- define "llm.image" -}}
{{ (index . 0).Values.image.registry }}{{ index . 1 }}:{{ (index . 0).Values.image.tag }}
{{- end -}}

{{/* Probes: gRPC health on a plaintext port, a TCP connect on a TLS one. */}}
{{- define "llm.probes" -}}
{{- $root := index . 0 -}}{{- $port := index . 1 -}}{{- $service := index . 2 -}}
{{- if $root.Values.tls.enabled }}
startupProbe:
  tcpSocket: {port: grpc}
  periodSeconds: 1
  failureThreshold: 30
readinessProbe:
  tcpSocket: {port: grpc}
  periodSeconds: 5
  timeoutSeconds: 2
  failureThreshold: 2
livenessProbe:
  tcpSocket: {port: grpc}
  periodSeconds: 10
  timeoutSeconds: 2
  failureThreshold: 3
{{- else }}
startupProbe:
  grpc: {port: {{ $port }}}
  periodSeconds: 1
  failureThreshold: 30
readinessProbe:
  grpc: {port: {{ $port }}, service: {{ $service }}}
  periodSeconds: 5
  timeoutSeconds: 2
  failureThreshold: 2
livenessProbe:
  grpc: {port: {{ $port }}}
  periodSeconds: 10
  timeoutSeconds: 2
  failureThreshold: 3
{{- end }}
{{- end -}}

{{- define "llm.securityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{- define "llm.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
{{- if .Values.tls.enabled }}
fsGroup: 65532
{{- end }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "llm.tlsConfig" -}}
{ cert_file = "/etc/tls/tls.crt", key_file = "/etc/tls/tls.key", client_ca_file = "/etc/tls/ca.crt" }
{{- end -}}

{{- define "llm.gatewayToml" -}}
{{- $v := .Values.gateway -}}
[server]
listen = "0.0.0.0:50051"
metrics_listen = "0.0.0.0:9464"
shutdown_grace_ms = {{ int $v.shutdownGraceMs }}
max_inflight_generations = {{ int $v.maxInflightGenerations }}
{{- if .Values.tls.enabled }}
tls = {{ include "llm.tlsConfig" . }}
{{- end }}
{{- with $v.extraConfig }}
{{ . }}
{{- end }}
{{- end -}}

{{- define "llm.processorToml" -}}
{{- $v := .Values.processor -}}
[server]
listen = "0.0.0.0:50052"
metrics_listen = "0.0.0.0:9465"
shutdown_grace_ms = {{ int $v.shutdownGraceMs }}
{{- if .Values.tls.enabled }}
tls = {{ include "llm.tlsConfig" . }}
{{- end }}

[gateway]
url = "{{ if .Values.tls.enabled }}https{{ else }}http{{ end }}://{{ include "llm.gateway" . }}-headless:50051"
balance = "dns"
resolve_interval_ms = 5000
token_env = "GATEWAY_TOKEN"
step_timeout_ms = 600000
{{- if .Values.tls.enabled }}
tls = { ca_file = "/etc/tls/ca.crt", cert_file = "/etc/tls/tls.crt", key_file = "/etc/tls/tls.key" }
{{- end }}

[redis]
mode = {{ .Values.redis.mode | quote }}
{{- if not .Values.redis.urlFromSecret }}
url = {{ required "redis.url is needed when redis.urlFromSecret is false" .Values.redis.url | quote }}
{{- end }}
{{- with .Values.redis.sentinelMaster }}
sentinel_master = {{ . | quote }}
{{- end }}
prefix = {{ .Values.redis.prefix | quote }}
lease_ttl_ms = {{ int .Values.redis.leaseTtlMs }}

[workspaces]
root = "/var/lib/session-processor/workspaces"

[agents.default]
role_prompt = {{ $v.agent.rolePrompt | quote }}
model = {{ $v.agent.model | quote }}
tools = [{{ range $i, $t := $v.agent.tools }}{{ if $i }}, {{ end }}{{ $t | quote }}{{ end }}]
{{- with $v.extraConfig }}
{{ . }}
{{- end }}
{{- end -}}
