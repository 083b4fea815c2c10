{{/*
The container image, with upstream's rule (chart 2.2.16): with global.imageRegistry set,
<registry>/<image.name>:<image.tag>; else <image.repository>@<image.digest>, or <image.repository>:<image.tag>.
reloader.deployment.image.{name,tag,digest} (this chart's earlier place; `name` is a full repository, as in older
upstream charts) win over image.{repository,tag,digest} when set.

An image that names upstream's own controller (a path ending in stakater/reloader: upstream's values.yaml copied
verbatim, or a mirror of it) is refused at render time: upstream's Go controller does not understand this chart's
flags and probes, and swapping the image underneath a release would run an image nobody chose.
*/}}
{{- define "reloader-image" -}}
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
{{- if or (eq $ref $upstream) (hasSuffix (printf "/%s" $upstream) $ref) -}}
{{- fail (printf "the image %s is upstream Stakater Reloader's controller, which this chart cannot run (it does not understand this chart's flags and probes). Remove image.name, image.repository and image.tag (and reloader.deployment.image.*) from your values to use this chart's image (ghcr.io/reloader-rs/reloader:%s), or point image.repository (image.name with global.imageRegistry) at where you pushed this project's image (make image)" $ref .Chart.AppVersion) -}}
{{- end -}}
{{- if $digest -}}
{{- printf "%s@%s" $ref $digest -}}
{{- else -}}
{{- printf "%s:%s" $ref ($tag | default .Chart.AppVersion) -}}
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
