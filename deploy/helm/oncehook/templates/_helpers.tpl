{{- define "oncehook.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "oncehook.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "oncehook.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "oncehook.check" -}}
{{- if not (has .Values.store.type (list "sqlite" "postgres")) -}}
{{- fail (printf "store.type %q: want sqlite or postgres" .Values.store.type) -}}
{{- end -}}
{{- if and (eq .Values.store.type "sqlite") (gt (int .Values.replicaCount) 1) -}}
{{- fail "store.type sqlite runs one replica (SQLite has one writer, on one volume): set replicaCount 1, or store.type postgres" -}}
{{- end -}}
{{- if and (eq .Values.store.type "postgres") (not .Values.store.postgres.existingSecret) -}}
{{- fail "store.type postgres needs store.postgres.existingSecret: the Secret holding the PostgreSQL URL" -}}
{{- end -}}
{{- end -}}
