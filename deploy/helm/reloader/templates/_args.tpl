{{/*
The controller's flags. Upstream's values render upstream's flags (chart 2.2.16), in upstream's spelling and with
upstream's conditions, so the same values file gives the same behaviour; tests/chart_fixtures.rs compares them
with upstream's renders. The differences: --is-openshift is always rendered, matching the RBAC the chart grants
(the controller would otherwise detect the API and watch DeploymentConfigs it may not be allowed to), and the
namespace selector goes without upstream's literal quotes.
*/}}
{{- define "reloader-args" -}}
{{- $r := .Values.reloader -}}
{{- $scoped := fromJsonArray (include "reloader-scopedNamespaces" .) -}}
{{- $ann := $r.custom_annotations | default dict -}}
{{- if $r.logFormat }}
- "--log-format={{ $r.logFormat }}"
{{- end }}
{{- if $r.logLevel }}
- "--log-level={{ $r.logLevel }}"
{{- end }}
{{- if $r.ignoreSecrets }}
- "--resources-to-ignore=secrets"
{{- end }}
{{- if $r.ignoreConfigMaps }}
- "--resources-to-ignore=configmaps"
{{- end }}
{{- $ignoredKinds := list }}
{{- if $r.ignoreJobs }}{{ $ignoredKinds = append $ignoredKinds "jobs" }}{{ end }}
{{- if $r.ignoreCronJobs }}{{ $ignoredKinds = append $ignoredKinds "cronjobs" }}{{ end }}
{{- with $ignoredKinds }}
- "--ignored-workload-types={{ join "," . }}"
{{- end }}
{{- if and $r.watchGlobally $r.ignoreNamespaces }}
- "--namespaces-to-ignore={{ $r.ignoreNamespaces }}"
{{- end }}
{{- if and $r.watchGlobally $r.namespaceSelector }}
{{- /* upstream wraps the value in literal quotes (the controller strips them); the plain value means the same */}}
- "--namespace-selector={{ $r.namespaceSelector }}"
{{- end }}
{{- if $r.resourceLabelSelector }}
- "--resource-label-selector={{ $r.resourceLabelSelector }}"
{{- end }}
{{- with $scoped }}
- "--namespaces={{ join "," . }}"
{{- end }}
{{- range $key, $flag := dict "configmap" "--configmap-annotation" "secret" "--secret-annotation" "auto" "--auto-annotation" "secret_auto" "--secret-auto-annotation" "configmap_auto" "--configmap-auto-annotation" "search" "--auto-search-annotation" "match" "--search-match-annotation" "ignore" "--ignore-annotation" "pausePeriod" "--pause-deployment-annotation" "pauseTime" "--pause-deployment-time-annotation" "configmap_exclude" "--configmap-exclude-annotation" "secret_exclude" "--secret-exclude-annotation" "secretproviderclass" "--secretproviderclass-annotation" "secretproviderclass_auto" "--secretproviderclass-auto-annotation" "secretproviderclass_exclude" "--secretproviderclass-exclude-annotation" }}
{{- with index $ann $key }}
- {{ $flag | quote }}
- {{ . | quote }}
{{- end }}
{{- end }}
{{- /* upstream renders the webhook URL only inside its custom_annotations block: without custom annotations
the flag is dropped and Reloader keeps reloading (NOTES.txt warns). */}}
{{- if and $r.webhookUrl $ann }}
- "--webhook-url"
- {{ $r.webhookUrl | quote }}
{{- end }}
{{- if $r.isArgoRollouts }}
- "--is-Argo-Rollouts=true"
{{- end }}
{{- range $r.workloadKinds }}
- "--workload-kind={{ . }}"
{{- end }}
- "--is-openshift={{ $r.isOpenshift | ternary "true" "false" }}"
{{- if $r.reloadOnCreate }}
- "--reload-on-create=true"
{{- end }}
{{- if $r.reloadOnDelete }}
- "--reload-on-delete=true"
{{- end }}
{{- if $r.syncAfterRestart }}
- "--sync-after-restart=true"
{{- end }}
{{- if ne $r.reloadStrategy "default" }}
- "--reload-strategy={{ $r.reloadStrategy }}"
{{- end }}
{{- if $r.enableHA }}
- "--enable-ha=true"
{{- with $r.leaderElection.leaseDuration }}
- "--leader-election-lease-duration={{ . }}"
{{- end }}
{{- with $r.leaderElection.renewDeadline }}
- "--leader-election-renew-deadline={{ . }}"
{{- end }}
{{- with $r.leaderElection.retryPeriod }}
- "--leader-election-retry-period={{ . }}"
{{- end }}
{{- end }}
{{- if $r.autoReloadAll }}
- "--auto-reload-all=true"
{{- end }}
{{- if $r.enableCSIIntegration }}
- "--enable-csi-integration=true"
{{- end }}
{{- if $r.enablePProf }}
- "--enable-pprof"
- "--pprof-addr={{ $r.pprofAddr }}"
{{- end }}
{{- if $r.hashKey.enabled }}
- "--hash-key-secret={{ include "reloader-namespace" $ }}/{{ include "reloader-hash-key-name" $ }}"
{{- end }}
{{- with $r.coalesceWindow }}
- "--coalesce-window={{ . }}"
{{- end }}
{{- with $r.reloadOn }}
- "--reload-on={{ . }}"
{{- end }}
{{- with $r.rolloutStrategy }}
- "--rollout-strategy={{ . }}"
{{- end }}
{{- if $r.namespaceRules }}
- "--namespace-rules=true"
{{- end }}
{{- if $r.allowCrossNamespaceReferences }}
- "--allow-cross-namespace-references=true"
{{- end }}
{{- with $r.rollouts }}
{{- if .maxConcurrent }}
- "--max-concurrent-rollouts={{ .maxConcurrent }}"
{{- end }}
{{- with .timeout }}
- "--rollout-timeout={{ . }}"
{{- end }}
{{- if .haltOnFailure }}
- "--halt-on-failed-rollout=true"
{{- end }}
{{- if .namespaceWindows }}
- "--namespace-reload-windows=true"
{{- end }}
{{- end }}
{{- range $r.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/* Environment: upstream's env.open/secret/existing/field, then the variables the chart itself sets. */}}
{{- define "reloader-env" -}}
{{- $r := .Values.reloader -}}
{{- $env := $r.deployment.env -}}
{{- $fullname := include "reloader-fullname" . -}}
{{- range $name, $value := $env.open }}
{{- if not (empty $value) }}
- name: {{ $name | quote }}
  value: {{ $value | quote }}
{{- end }}
{{- end }}
{{- range $name, $value := $env.secret }}
{{- if not (empty $value) }}
- name: {{ $name | quote }}
  valueFrom:
    secretKeyRef:
      name: {{ $fullname }}
      key: {{ $name | quote }}
{{- end }}
{{- end }}
{{- range $secret, $keys := $env.existing }}
{{- range $name, $key := $keys }}
- name: {{ $name | quote }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret | quote }}
      key: {{ $key | quote }}
{{- end }}
{{- end }}
{{- range $name, $path := $env.field }}
{{- if not (empty $path) }}
- name: {{ $name | quote }}
  valueFrom:
    fieldRef:
      fieldPath: {{ $path | quote }}
{{- end }}
{{- end }}
{{- if and (not $r.watchGlobally) (not (fromJsonArray (include "reloader-scopedNamespaces" .))) }}
- name: KUBERNETES_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end }}
{{- if $r.enableHA }}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end }}
{{- if $r.enableMetricsByNamespace }}
- name: METRICS_COUNT_BY_NAMESPACE
  value: enabled
{{- end }}
- name: RELOADER_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: RELOADER_DEPLOYMENT_NAME
  value: {{ $fullname }}
{{- end -}}

{{/* Probe timings: upstream's defaults (timeout 5, failure 5, period 10, success 1, initial delay 10). */}}
{{- define "reloader-probeTimings" -}}
{{- $p := . | default dict -}}
timeoutSeconds: {{ $p.timeoutSeconds | default 5 }}
failureThreshold: {{ $p.failureThreshold | default 5 }}
periodSeconds: {{ $p.periodSeconds | default 10 }}
successThreshold: {{ $p.successThreshold | default 1 }}
initialDelaySeconds: {{ $p.initialDelaySeconds | default 10 }}
{{- end -}}
