{{/*
Names, labels and selectors are upstream's (chart 2.2.16): the full name is always <release>-<name> (so
`helm install reloader …` names everything reloader-reloader*), app=<fullname>, release=<release>, so `helm upgrade`
from upstream's chart keeps the same objects and the Deployment's immutable selector.
*/}}
{{- define "reloader-name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" | lower -}}
{{- end -}}

{{- define "reloader-fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (default .Chart.Name .Values.nameOverride) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The namespace the controller runs in: upstream's top-level `namespace` value, else the release's. */}}
{{- define "reloader-namespace" -}}
{{- .Values.namespace | default .Release.Namespace -}}
{{- end -}}

{{/* A map of user values rendered through tpl, as YAML (upstream applies tpl to e.g. deployment.annotations, so
`rel: "{{ .Release.Name }}"` works): (dict "value" <map> "root" $). Empty when the map is. */}}
{{- define "reloader-tpl" -}}
{{- with .value -}}
{{- tpl (toYaml .) $.root -}}
{{- end -}}
{{- end -}}

{{- define "reloader-selector" -}}
app: {{ include "reloader-fullname" . }}
release: {{ .Release.Name | quote }}
{{- end -}}

{{- define "reloader-labels.chart" -}}
{{ include "reloader-selector" . }}
chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | quote }}
heritage: {{ .Release.Service | quote }}
app.kubernetes.io/name: {{ include "reloader-name" . }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
{{- end -}}

{{/* The chart's labels merged with user label maps (dict "root" . "extra" (list …)): a user's label replaces the
chart's label of the same key (e.g. a ServiceMonitor's `release: prometheus`), except the selector labels of
the Deployment and its pods ("selectorWins" true), which must keep matching. */}}
{{- define "reloader-labels" -}}
{{- $labels := fromYaml (include "reloader-labels.chart" .root) -}}
{{- range .extra -}}
{{- $labels = merge (fromYaml (include "reloader-tpl" (dict "value" . "root" $.root)) | default dict) $labels -}}
{{- end -}}
{{- if .selectorWins -}}
{{- $labels = merge (fromYaml (include "reloader-selector" .root)) $labels -}}
{{- end -}}
{{- toYaml $labels -}}
{{- end -}}

{{- define "reloader-serviceAccountName" -}}
{{- if .Values.reloader.serviceAccount.create -}}
{{ default (include "reloader-fullname" .) .Values.reloader.serviceAccount.name }}
{{- else -}}
{{ default "default" .Values.reloader.serviceAccount.name }}
{{- end -}}
{{- end -}}

{{- define "reloader-podAntiAffinity" -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        labelSelector:
          matchLabels:
            {{- include "reloader-selector" . | nindent 12 }}
        topologyKey: kubernetes.io/hostname
{{- end -}}

{{/* The namespaces of scoped mode as a list: the controller's own namespace (upstream v1 adds it, first) and
reloader.namespaces (a list or a comma-separated string). Empty unless scoped mode is used. */}}
{{- define "reloader-scopedNamespaces" -}}
{{- $given := .Values.reloader.namespaces -}}
{{- if kindIs "string" $given -}}
{{- $given = splitList "," $given -}}
{{- end -}}
{{- $list := list -}}
{{- range $given -}}
{{- $ns := trim (toString .) -}}
{{- if $ns -}}
{{- $list = append $list $ns -}}
{{- end -}}
{{- end -}}
{{- if $list -}}
{{- $list = prepend $list (include "reloader-namespace" .) -}}
{{- end -}}
{{- toJson (uniq $list) -}}
{{- end -}}

{{/* Values that upstream's chart renders into a crash-looping or silently wrong install fail here instead. */}}
{{- define "reloader-validate" -}}
{{- $r := .Values.reloader -}}
{{- if and $r.ignoreSecrets $r.ignoreConfigMaps -}}
{{- fail "reloader.ignoreSecrets and reloader.ignoreConfigMaps are both true: nothing would be watched (upstream's controller exits at start). Set at most one of them." -}}
{{- end -}}
{{- $scoped := fromJsonArray (include "reloader-scopedNamespaces" .) -}}
{{- if and $scoped $r.watchGlobally -}}
{{- fail "reloader.namespaces is set but reloader.watchGlobally is true; set reloader.watchGlobally=false to use scoped namespace mode." -}}
{{- end -}}
{{- if and (gt (int $r.deployment.replicas) 1) (not $r.enableHA) -}}
{{- fail (printf "reloader.deployment.replicas is %d but reloader.enableHA is false: replicas without leader election would each roll every workload. Set reloader.enableHA=true, or replicas to 1." (int $r.deployment.replicas)) -}}
{{- end -}}
{{- $chartSelector := fromYaml (include "reloader-selector" .) -}}
{{- range $key, $value := $r.deployment.selectorLabels -}}
{{- if and (hasKey $chartSelector $key) (ne (toString $value) (get $chartSelector $key)) -}}
{{- fail (printf "reloader.deployment.selectorLabels.%s is %q but the chart's pods carry %s=%s: the Deployment would select no pod." $key (toString $value) $key (get $chartSelector $key)) -}}
{{- end -}}
{{- end -}}
{{- if and (not $r.watchGlobally) (or $r.ignoreNamespaces $r.namespaceSelector) -}}
{{- fail "reloader.ignoreNamespaces and reloader.namespaceSelector only apply when reloader.watchGlobally=true (upstream ignores them silently otherwise)." -}}
{{- end -}}
{{- if and (not $r.watchGlobally) $r.rollouts.namespaceWindows -}}
{{- fail "reloader.rollouts.namespaceWindows needs reloader.watchGlobally=true (namespaces are read cluster-wide)." -}}
{{- end -}}
{{- if and (not $r.watchGlobally) $r.namespaceRules -}}
{{- fail "reloader.namespaceRules needs reloader.watchGlobally=true (namespaces are read cluster-wide)." -}}
{{- end -}}
{{- end -}}

{{/* The rules the controller needs, for a ClusterRole (cluster=true) or a namespace's Role. Only the verbs the
controller uses: it never GETs ConfigMaps/Secrets (watch caches), patches workloads (never updates them), reads
Jobs/CronJobs/Rollouts/DeploymentConfigs fresh before rewriting them, and writes Events through events.k8s.io. */}}
{{- define "reloader-rules" -}}
{{- $r := .root.Values.reloader -}}
{{- if not $r.ignoreConfigMaps }}
- apiGroups: [""]
  resources: [configmaps]
  verbs: [list, watch]
{{- end }}
{{- if not $r.ignoreSecrets }}
- apiGroups: [""]
  resources: [secrets]
  verbs: [list, watch]
{{- end }}
{{- if and .cluster (or $r.namespaceSelector $r.rollouts.namespaceWindows $r.namespaceRules) }}
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch]
{{- end }}
- apiGroups: [apps]
  resources: [deployments, daemonsets, statefulsets]
  verbs: [list, watch, patch]
{{- if not $r.ignoreCronJobs }}
- apiGroups: [batch]
  resources: [cronjobs]
  verbs: [get, list, watch, patch]
{{- end }}
{{- if not $r.ignoreJobs }}
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, patch, create, delete]
{{- else if not $r.ignoreCronJobs }}
{{- /* upstream v1 drops this with ignoreJobs, which breaks CronJob reloads */}}
- apiGroups: [batch]
  resources: [jobs]
  verbs: [create]
{{- end }}
{{- if $r.isArgoRollouts }}
- apiGroups: [argoproj.io]
  resources: [rollouts]
  verbs: [get, list, watch, patch]
{{- end }}
{{- if $r.isOpenshift }}
- apiGroups: [apps.openshift.io]
  resources: [deploymentconfigs]
  verbs: [get, list, watch, patch]
{{- end }}
{{- if or $r.podRestarts (has $r.rolloutStrategy (list "evict-pods" "delete-pods")) }}
- apiGroups: [""]
  resources: [pods]
  verbs: [list, delete]
- apiGroups: [""]
  resources: [pods/eviction]
  verbs: [create]
{{- /* the selector and replicas are read fresh before each restart; a Deployment's ReplicaSets prove its pods are its own */}}
- apiGroups: [apps]
  resources: [deployments, daemonsets, statefulsets]
  verbs: [get]
- apiGroups: [apps]
  resources: [replicasets]
  verbs: [list]
{{- end }}
{{- $presets := dict "knative-service" (list "serving.knative.dev" "services") "kruise-cloneset" (list "apps.kruise.io" "clonesets") "kruise-statefulset" (list "apps.kruise.io" "statefulsets") "kruise-daemonset" (list "apps.kruise.io" "daemonsets") }}
{{- range $r.workloadKinds }}
{{- $groupResource := get $presets . }}
{{- if not $groupResource }}
{{- $gvk := splitList "/" (first (splitList "=" .)) }}
{{- /* the conventional plural, as the controller derives it (configured_kinds.rs): policies, boxes, gateways */}}
{{- $lower := lower (index $gvk 2) }}
{{- $plural := printf "%ss" $lower }}
{{- if regexMatch "(s|x|ch|sh)$" $lower }}
{{- $plural = printf "%ses" $lower }}
{{- else if regexMatch "[^aeiou]y$" $lower }}
{{- $plural = printf "%sies" (trimSuffix "y" $lower) }}
{{- end }}
{{- $groupResource = list (index $gvk 0) $plural }}
{{- end }}
- apiGroups: [{{ index $groupResource 0 }}]
  resources: [{{ index $groupResource 1 }}]
  verbs: [get, list, watch, patch]
{{- end }}
{{- if $r.enableCSIIntegration }}
- apiGroups: [secrets-store.csi.x-k8s.io]
  resources: [secretproviderclasspodstatuses, secretproviderclasses]
  verbs: [list, watch]
{{- end }}
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end -}}

{{/* The Secret holding the --hash-key-secret key: the user's, or the one the chart creates. */}}
{{- define "reloader-hash-key-name" -}}
{{- .Values.reloader.hashKey.existingSecret | default (printf "%s-hash-key" (include "reloader-fullname" .)) -}}
{{- end -}}
