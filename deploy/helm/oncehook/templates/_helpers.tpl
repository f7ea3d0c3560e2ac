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
{{- /* Every ${NAME} the config names must be in the pod's environment: unset, the gateway refuses the config and the pod exits. */ -}}
{{- $set := list -}}
{{- range .Values.secretEnv -}}
{{- $set = append $set .name -}}
{{- end -}}
{{- range regexFindAll "\\$\\{[A-Za-z_][A-Za-z0-9_]*\\}" (include "oncehook.userConfig" . | replace "$$" "") -1 -}}
{{- $name := trimPrefix "${" . | trimSuffix "}" -}}
{{- if not (has $name $set) -}}
{{- fail (printf "config names ${%s}, which no secretEnv entry sets, so the pod would exit: add {name: %s, secret: <a Secret you create>, key: <its key>} to secretEnv" $name $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- /*
The values' config as a map: a YAML text (as values.yaml writes it) or a
map. The chart writes listen, store, redis and api.listen from the values
itself and merges them in, so that the config's own api (its tokens) and
the chart's api.listen make one api, never "api: given twice".
*/ -}}
{{- define "oncehook.userConfig" -}}
{{- $c := .Values.config | default dict -}}
{{- if kindIs "string" $c -}}
{{- $c = fromYaml $c -}}
{{- if hasKey $c "Error" -}}
{{- fail (printf "config: not a YAML mapping: %s" (get $c "Error")) -}}
{{- end -}}
{{- end -}}
{{- toYaml $c -}}
{{- end -}}

{{- define "oncehook.config" -}}
{{- $c := include "oncehook.userConfig" . | fromYaml -}}
{{- range $k, $from := dict "listen" "service.intakePort" "store" "store.type" "redis" "redisURL" -}}
{{- if hasKey $c $k -}}
{{- fail (printf "config sets %s, which the chart writes from the values (%s): remove it from config" $k $from) -}}
{{- end -}}
{{- end -}}
{{- $api := get $c "api" | default dict -}}
{{- if hasKey $api "listen" -}}
{{- fail "config sets api.listen, which the chart writes from the values (service.apiPort): keep only api.tokens in config" -}}
{{- end -}}
{{- $_ := set $c "listen" (printf "0.0.0.0:%v" .Values.service.intakePort) -}}
{{- if eq .Values.store.type "sqlite" -}}
{{- $_ := set $c "store" "sqlite:///data/oncehook.db" -}}
{{- else -}}
{{- $_ := set $c "store" "${ONCEHOOK_STORE}" -}}
{{- end -}}
{{- with .Values.redisURL -}}
{{- $_ := set $c "redis" . -}}
{{- end -}}
{{- $_ := set $api "listen" (printf "0.0.0.0:%v" .Values.service.apiPort) -}}
{{- $_ := set $c "api" $api -}}
{{- toYaml $c -}}
{{- end -}}

{{- /* "true" when the config has API tokens: the gateway opens its API listener only then. */ -}}
{{- define "oncehook.apiListens" -}}
{{- $c := include "oncehook.userConfig" . | fromYaml -}}
{{- if dig "api" "tokens" list $c -}}true{{- end -}}
{{- end -}}
