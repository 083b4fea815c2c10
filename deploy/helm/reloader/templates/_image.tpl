{{/*
The container image, with upstream's rule (chart 2.2.16): with global.imageRegistry set,
<registry>/<image.name>:<image.tag>; else <image.repository>@<image.digest>, or <image.repository>:<image.tag>.
reloader.deployment.image.{name,tag,digest} (this chart's earlier place; `name` is a full repository, as in older
upstream charts) win over image.{repository,tag,digest} when set.

An image that names upstream's own controller (a path ending in stakater/reloader: upstream's values.yaml copied
verbatim, or a mirror of it) is read as this project's image at the same registry, with this chart's appVersion:
upstream's Go controller does not understand this chart's flags and probes. Docker Hub's stakater/reloader maps to
this project's default registry. NOTES.txt says when this happened.
*/}}
{{- define "reloader-image.parts" -}}
{{- $img := .Values.image | default dict -}}
{{- $legacy := .Values.reloader.deployment.image | default dict -}}
{{- $registry := (.Values.global | default dict).imageRegistry -}}
{{- $ref := $legacy.name | default $img.repository -}}
{{- if $registry -}}
{{- $ref = printf "%s/%s" (trimSuffix "/" $registry) $img.name -}}
{{- end -}}
{{- $tag := $legacy.tag | default $img.tag | default "" | toString -}}
{{- $digest := "" -}}
{{- if not $registry -}}
{{- $digest = $legacy.digest | default $img.digest | default "" -}}
{{- end -}}
{{- $upstream := "stakater/reloader" -}}
{{- $replaced := "" -}}
{{- if or (eq $ref $upstream) (hasSuffix (printf "/%s" $upstream) $ref) -}}
{{- $replaced = $ref -}}
{{- $prefix := trimSuffix $upstream $ref -}}
{{- if has $prefix (list "" "docker.io/" "index.docker.io/" "registry-1.docker.io/") -}}
{{- $prefix = "ghcr.io/" -}}
{{- end -}}
{{- $ref = printf "%sreloader-rs/reloader" $prefix -}}
{{- $tag = "" -}}
{{- $digest = "" -}}
{{- end -}}
{{- toJson (dict "ref" $ref "tag" ($tag | default .Chart.AppVersion) "digest" $digest "replaced" $replaced) -}}
{{- end -}}

{{- define "reloader-image" -}}
{{- $p := fromJson (include "reloader-image.parts" .) -}}
{{- if $p.digest -}}
{{- printf "%s@%s" $p.ref $p.digest -}}
{{- else -}}
{{- printf "%s:%s" $p.ref $p.tag -}}
{{- end -}}
{{- end -}}

{{- define "reloader-image.pullPolicy" -}}
{{- $legacy := .Values.reloader.deployment.image | default dict -}}
{{- $legacy.pullPolicy | default (.Values.image | default dict).pullPolicy | default "IfNotPresent" -}}
{{- end -}}

{{/* Image pull secrets as a list of {name: …}: upstream accepts plain names (`[my-secret]`) as well as objects.
(list <list>…): empty lists and entries are skipped, duplicates dropped. */}}
{{- define "reloader-pullSecrets" -}}
{{- $out := list -}}
{{- range . -}}
{{- range (. | default list) -}}
{{- if kindIs "map" . -}}
{{- if .name -}}
{{- $out = append $out (dict "name" (toString .name)) -}}
{{- end -}}
{{- else if . -}}
{{- $out = append $out (dict "name" (toString .)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with uniq $out -}}
{{- toYaml . -}}
{{- end -}}
{{- end -}}
