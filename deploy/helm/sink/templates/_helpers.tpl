{{/* The name of every object of the release. */}}
{{- define "sink.fullname" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sink.labels" -}}
app.kubernetes.io/name: sink
app.kubernetes.io/instance: {{ include "sink.fullname" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "sink.selector" -}}
app.kubernetes.io/instance: {{ include "sink.fullname" . }}
{{- end -}}

{{/* The Secret the pod reads its passwords from. */}}
{{- define "sink.secretName" -}}
{{- default (printf "%s-credentials" (include "sink.fullname" .)) .Values.existingSecret -}}
{{- end -}}

{{- define "sink.hasKafkaPassword" -}}
{{- if or .Values.credentials.kafkaPassword (and .Values.existingSecret .Values.existingSecretKeys.kafkaPassword) }}true{{ end -}}
{{- end -}}

{{- define "sink.hasClickHousePassword" -}}
{{- if or .Values.credentials.clickhousePassword (and .Values.existingSecret .Values.existingSecretKeys.clickhousePassword) }}true{{ end -}}
{{- end -}}

{{- define "sink.hasOAuthClientSecret" -}}
{{- if or .Values.credentials.oauthClientSecret (and .Values.existingSecret .Values.existingSecretKeys.oauthClientSecret) }}true{{ end -}}
{{- end -}}

{{/* Secret files mounted at /etc/sink/secrets: the ClickHouse password, the OAuth client secret. */}}
{{- define "sink.hasSecretFiles" -}}
{{- if or (include "sink.hasClickHousePassword" .) (include "sink.hasOAuthClientSecret" .) }}true{{ end -}}
{{- end -}}

{{/* Memory limit in MiB: 2 x buffer + 192. */}}
{{- define "sink.memoryMiB" -}}
{{- add (mul 2 (int .Values.bufferMemoryMiB)) 192 -}}
{{- end -}}

{{/* The sink's config.yaml: values.config with the chart-owned keys set. */}}
{{- define "sink.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- $batch := deepCopy (default dict $cfg.batch) -}}
{{- $_ := set $batch "buffer_memory" (printf "%dMiB" (int .Values.bufferMemoryMiB)) -}}
{{- $_ := set $cfg "batch" $batch -}}
{{- $_ := set $cfg "shutdown_timeout" (printf "%ds" (int .Values.shutdownTimeoutSeconds)) -}}
{{- $http := deepCopy (default dict $cfg.http) -}}
{{- $_ := set $http "listen" (printf "0.0.0.0:%d" (int .Values.httpPort)) -}}
{{- $_ := set $cfg "http" $http -}}
{{- if include "sink.hasClickHousePassword" . -}}
{{- $ch := deepCopy (default dict $cfg.clickhouse) -}}
{{- $_ := set $ch "password_file" "/etc/sink/secrets/clickhouse-password" -}}
{{- $_ := set $cfg "clickhouse" $ch -}}
{{- end -}}
{{- if include "sink.hasOAuthClientSecret" . -}}
{{- $kafka := deepCopy (default dict $cfg.kafka) -}}
{{- $sasl := deepCopy (default dict $kafka.sasl) -}}
{{- $oauth := deepCopy (default dict $sasl.oauth) -}}
{{- $_ := set $oauth "client_secret_file" "/etc/sink/secrets/oauth-client-secret" -}}
{{- $_ := set $sasl "oauth" $oauth -}}
{{- $_ := set $kafka "sasl" $sasl -}}
{{- $_ := set $cfg "kafka" $kafka -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}
