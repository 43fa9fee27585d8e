{{/* Names ---------------------------------------------------------------- */}}

{{- define "saintpipe.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-scoped base name; component names append a suffix, so keep room. */}}
{{- define "saintpipe.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "saintpipe.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels: call with (dict "ctx" $ "component" "trainer"). */}}
{{- define "saintpipe.selectorLabels" -}}
app.kubernetes.io/name: {{ include "saintpipe.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "saintpipe.labels" -}}
helm.sh/chart: {{ include "saintpipe.chart" .ctx }}
{{ include "saintpipe.selectorLabels" . }}
app.kubernetes.io/part-of: saintpipe
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
{{- end -}}

{{/* Images ---------------------------------------------------------------- */}}

{{- define "saintpipe.image" -}}
{{- include "saintpipe.imageRef" (dict "repository" .Values.image.repository "tag" (.Values.image.tag | default .Chart.AppVersion) "digest" .Values.image.digest) -}}
{{- end -}}

{{- define "saintpipe.trainerImage" -}}
{{- $repo := .Values.trainer.image.repository | default .Values.image.repository -}}
{{- $tag := .Values.trainer.image.tag | default (.Values.image.tag | default .Chart.AppVersion) -}}
{{- $digest := .Values.trainer.image.digest | default (and (not .Values.trainer.image.repository) (not .Values.trainer.image.tag) .Values.image.digest) -}}
{{- include "saintpipe.imageRef" (dict "repository" $repo "tag" $tag "digest" $digest) -}}
{{- end -}}

{{/* repository:tag, or repository@digest when a digest pins it: (dict "repository" r "tag" t "digest" d). */}}
{{- define "saintpipe.imageRef" -}}
{{- if .digest -}}
{{- printf "%s@%s" .repository .digest -}}
{{- else -}}
{{- printf "%s:%s" .repository .tag -}}
{{- end -}}
{{- end -}}

{{/* Secrets ---------------------------------------------------------------- */}}

{{- define "saintpipe.authSecretName" -}}
{{- printf "%s-auth" (include "saintpipe.fullname" .) -}}
{{- end -}}

{{/* Does the chart's own Secret carry the Redis password? */}}
{{- define "saintpipe.redisPasswordInChartSecret" -}}
{{- if .Values.redis.enabled -}}
{{- if not .Values.redis.auth.existingSecret -}}true{{- end -}}
{{- else if and .Values.redis.external.auth.enabled (not .Values.redis.external.auth.existingSecret) -}}true
{{- end -}}
{{- end -}}

{{- define "saintpipe.redisAuthEnabled" -}}
{{- if or .Values.redis.enabled .Values.redis.external.auth.enabled -}}true{{- end -}}
{{- end -}}

{{/* The Secret and key holding the Redis password: "name key". */}}
{{- define "saintpipe.redisPasswordRef" -}}
{{- if .Values.redis.enabled -}}
{{- if .Values.redis.auth.existingSecret -}}
{{ .Values.redis.auth.existingSecret }} {{ .Values.redis.auth.existingSecretKey }}
{{- else -}}
{{ include "saintpipe.authSecretName" . }} redis-password
{{- end -}}
{{- else if .Values.redis.external.auth.existingSecret -}}
{{ .Values.redis.external.auth.existingSecret }} {{ .Values.redis.external.auth.existingSecretKey }}
{{- else -}}
{{ include "saintpipe.authSecretName" . }} redis-password
{{- end -}}
{{- end -}}

{{- define "saintpipe.rayTokenRef" -}}
{{- if .Values.ray.auth.existingSecret -}}
{{ .Values.ray.auth.existingSecret }} {{ .Values.ray.auth.existingSecretKey }}
{{- else -}}
{{ include "saintpipe.authSecretName" . }} ray-token
{{- end -}}
{{- end -}}

{{/* The Secret and key holding the feature shards' token: "name key". */}}
{{- define "saintpipe.featureTokenRef" -}}
{{- if .Values.featureShards.auth.existingSecret -}}
{{ .Values.featureShards.auth.existingSecret }} {{ .Values.featureShards.auth.existingSecretKey }}
{{- else -}}
{{ include "saintpipe.authSecretName" . }} feature-token
{{- end -}}
{{- end -}}

{{/* The Secret with the feature shards' tls.crt, tls.key and ca.crt. */}}
{{- define "saintpipe.featureTlsSecretName" -}}
{{- .Values.featureShards.tls.existingSecret | default (printf "%s-feature-tls" (include "saintpipe.fullname" .)) -}}
{{- end -}}

{{/* Redis ------------------------------------------------------------------ */}}

{{/* The Redis URL, without credentials: the password reaches processes as a file (saintpipe.secretsVolume). */}}
{{- define "saintpipe.redisUrl" -}}
{{- if .Values.redis.enabled -}}
redis://{{ include "saintpipe.fullname" . }}-redis:6379/0
{{- else -}}
{{- $url := required "redis.external.url is required when redis.enabled=false" .Values.redis.external.url -}}
{{- if not (regexMatch "^rediss?://[^@/:]+(:[0-9]+)?(/[0-9]+)?$" $url) -}}
{{- fail (printf "redis.external.url %q: expected redis://HOST[:PORT][/DB] (or rediss://) without credentials; the password comes from redis.external.auth" $url) -}}
{{- end -}}
{{- $url -}}
{{- end -}}
{{- end -}}

{{/* Where secrets are mounted as files (never environment variables, never arguments). */}}
{{- define "saintpipe.secretsDir" -}}/var/run/secrets/saintpipe{{- end -}}

{{/* Does a pod with these flags get secret files? (dict "ctx" $ "redis" bool "ray" bool "features" ""|"server"|"client") */}}
{{- define "saintpipe.secretsWanted" -}}
{{- if or .ray .features (and .redis (include "saintpipe.redisAuthEnabled" .ctx)) -}}true{{- end -}}
{{- end -}}

{{/* A projected volume with the secrets a pod needs, one file each (nothing when it needs none):
     (dict "ctx" $ "redis" true "ray" false "features" "client"). Readable by the pod's group (fsGroup) only.
     features: "server" (the shard's certificate, key, CA and token) or "client" (the CA and token). */}}
{{- define "saintpipe.secretsVolume" -}}
{{- $ctx := .ctx -}}
{{- if include "saintpipe.secretsWanted" . }}
- name: secrets
  projected:
    defaultMode: 0440
    sources:
      {{- if and .redis (include "saintpipe.redisAuthEnabled" $ctx) }}
      {{- $ref := splitList " " (include "saintpipe.redisPasswordRef" $ctx) }}
      - secret:
          name: {{ index $ref 0 }}
          items:
            - key: {{ index $ref 1 }}
              path: redis-password
      {{- end }}
      {{- if .ray }}
      {{- $tok := splitList " " (include "saintpipe.rayTokenRef" $ctx) }}
      - secret:
          name: {{ index $tok 0 }}
          items:
            - key: {{ index $tok 1 }}
              path: ray-token
      {{- end }}
      {{- if .features }}
      {{- $ft := splitList " " (include "saintpipe.featureTokenRef" $ctx) }}
      - secret:
          name: {{ index $ft 0 }}
          items:
            - key: {{ index $ft 1 }}
              path: feature-token
      {{- if $ctx.Values.featureShards.tls.enabled }}
      - secret:
          name: {{ include "saintpipe.featureTlsSecretName" $ctx }}
          items:
            - key: ca.crt
              path: tls/ca.crt
            {{- if eq .features "server" }}
            - key: tls.crt
              path: tls/server.crt
            - key: tls.key
              path: tls/server.key
            {{- end }}
      {{- end }}
      {{- end }}
{{- end }}
{{- end -}}

{{/* The mount of saintpipe.secretsVolume (same dict). */}}
{{- define "saintpipe.secretsMount" -}}
{{- if include "saintpipe.secretsWanted" . }}
- name: secrets
  mountPath: {{ include "saintpipe.secretsDir" .ctx }}
  readOnly: true
{{- end }}
{{- end -}}

{{/* Feature shards --------------------------------------------------------- */}}

{{- define "saintpipe.featureShardName" -}}
{{- printf "%s-feature-shard" (include "saintpipe.fullname" .) -}}
{{- end -}}

{{/* "pod-0.svc.ns.svc.cluster.local:50051;pod-1..." for the trainer's --features. */}}
{{- define "saintpipe.featureAddresses" -}}
{{- $name := include "saintpipe.featureShardName" . -}}
{{- $addrs := list -}}
{{- range $k := until (int .Values.featureShards.replicas) -}}
{{- $addrs = append $addrs (printf "%s-%d.%s.%s.svc.%s:%d" $name $k $name $.Release.Namespace $.Values.clusterDomain (int $.Values.featureShards.port)) -}}
{{- end -}}
{{- join ";" $addrs -}}
{{- end -}}

{{/* A feature shard's health probe: the image's gRPC health probe, over TLS when the shards speak it. */}}
{{- define "saintpipe.featureShardProbe" -}}
{{- if .Values.featureShards.tls.enabled -}}
exec:
  command:
    - python
    - -m
    - saintpipe.cli.health_probe
    - grpc
    - 127.0.0.1:{{ .Values.featureShards.port }}
    - --tls-ca
    - {{ include "saintpipe.secretsDir" . }}/tls/ca.crt
timeoutSeconds: 5
{{- else -}}
grpc:
  port: {{ .Values.featureShards.port }}
{{- end -}}
{{- end -}}

{{- define "saintpipe.rayHeadAddress" -}}
{{- printf "%s-ray-head.%s.svc.%s:6379" (include "saintpipe.fullname" .) .Release.Namespace .Values.clusterDomain -}}
{{- end -}}

{{/* Pod pieces shared by components ----------------------------------------- */}}

{{/* env: Redis URL (its password as a file), Ray token (as a file, when ray=true), HOME=/tmp (when home=true),
     extraEnv. Call with (dict "ctx" $ "redis" true "ray" false "home" true); mount saintpipe.secretsVolume with
     the same redis/ray flags. */}}
{{- define "saintpipe.env" -}}
{{- $ctx := .ctx -}}
{{- if .redis }}
- name: SAINTPIPE_REDIS_URL
  value: {{ include "saintpipe.redisUrl" $ctx | quote }}
{{- if include "saintpipe.redisAuthEnabled" $ctx }}
- name: SAINTPIPE_REDIS_PASSWORD_FILE
  value: {{ include "saintpipe.secretsDir" $ctx }}/redis-password
{{- end }}
{{- end }}
{{- if .ray }}
- name: RAY_AUTH_MODE
  value: token
- name: RAY_AUTH_TOKEN_PATH
  value: {{ include "saintpipe.secretsDir" $ctx }}/ray-token
{{- end }}
{{- if .home }}
# The root filesystem is read-only: HOME (Ray's and Numba's files) is the /tmp emptyDir.
- name: HOME
  value: /tmp
{{- end }}
{{- range $k, $v := $ctx.Values.extraEnv }}
- name: {{ $k }}
  value: {{ $v | toString | quote }}
{{- end }}
{{- end -}}

{{/* The dataset volume. */}}
{{- define "saintpipe.dataVolume" -}}
- name: data
{{- if eq .Values.data.source "demo" }}
  emptyDir:
    sizeLimit: {{ .Values.data.emptyDirSizeLimit }}
{{- else if eq .Values.data.source "claim" }}
  persistentVolumeClaim:
    claimName: {{ required "data.claim.name is required when data.source=claim" .Values.data.claim.name }}
    readOnly: true
{{- else }}
{{- fail (printf "data.source %q: expected \"demo\" or \"claim\"" .Values.data.source) }}
{{- end }}
{{- end -}}

{{- define "saintpipe.dataMount" -}}
- name: data
  mountPath: /data
  readOnly: true
{{- if and (eq .Values.data.source "claim") .Values.data.claim.subPath }}
  subPath: {{ .Values.data.claim.subPath }}
{{- end }}
{{- end -}}

{{/* Init container writing the demo dataset into the pod's emptyDir. */}}
{{- define "saintpipe.prepareDataInit" -}}
{{- if eq .Values.data.source "demo" }}
- name: prepare-data
  image: {{ include "saintpipe.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command:
    - saintpipe
    - data
    - generate
    - demo
    - --out
    - {{ .Values.data.dir | quote }}
    - --nodes
    - {{ .Values.data.demo.nodes | quote }}
    - --shards
    - {{ .Values.featureShards.replicas | quote }}
    - --seed
    - {{ .Values.data.demo.seed | quote }}
    # A pod whose containers restart keeps its emptyDir: the dataset written the first time is reused.
    - --keep-existing
  env:
    - name: HOME
      value: /tmp
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
  volumeMounts:
    - name: data
      mountPath: /data
    - name: tmp
      mountPath: /tmp
  resources:
    requests: {cpu: 250m, memory: 512Mi}
    limits: {cpu: "1", memory: 2Gi}
{{- end }}
{{- end -}}

{{/* nodeSelector/tolerations/affinity/pull secrets/security context: (dict "ctx" $ "c" .Values.trainer). */}}
{{- define "saintpipe.podPlacement" -}}
{{- $ctx := .ctx -}}
{{- with $ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (.c.nodeSelector | default $ctx.Values.nodeSelector) }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (.c.tolerations | default $ctx.Values.tolerations) }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (.c.affinity | default $ctx.Values.affinity) }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Pod annotations; metricsPort adds the prometheus.io/* ones. (dict "ctx" $ "metricsPort" 9101) */}}
{{- define "saintpipe.podAnnotations" -}}
{{- $ctx := .ctx -}}
{{- $ann := dict -}}
{{- range $k, $v := $ctx.Values.podAnnotations }}{{ $_ := set $ann $k ($v | toString) }}{{ end -}}
{{- if and .metricsPort $ctx.Values.monitoring.podAnnotations -}}
{{- $_ := set $ann "prometheus.io/scrape" "true" -}}
{{- $_ := set $ann "prometheus.io/port" (.metricsPort | toString) -}}
{{- $_ := set $ann "prometheus.io/path" "/metrics" -}}
{{- end -}}
{{- with $ann }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Pod-level security: the chart's ServiceAccount, no API token, the pod security context. */}}
{{- define "saintpipe.podSecurity" -}}
serviceAccountName: {{ include "saintpipe.serviceAccountName" . }}
automountServiceAccountToken: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end -}}

{{- define "saintpipe.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "saintpipe.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/* The writable /tmp of a read-only root filesystem. */}}
{{- define "saintpipe.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.tmpSizeLimit }}
{{- end -}}

{{- define "saintpipe.tmpMount" -}}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/* The /dev/shm volume Ray's object store needs. */}}
{{- define "saintpipe.shmVolume" -}}
- name: dshm
  emptyDir:
    medium: Memory
    sizeLimit: {{ .Values.ray.shmSize }}
{{- end -}}

{{/* Ray readiness: the GCS answers (token auth applies). */}}
{{- define "saintpipe.rayHealthProbe" -}}
exec:
  command: ["ray", "health-check", "--address", {{ . | quote }}]
periodSeconds: 10
timeoutSeconds: 10
failureThreshold: 6
{{- end -}}

{{/* NetworkPolicy ------------------------------------------------------------ */}}

{{/* A `from` list admitting the release's pods of the given components: (dict "ctx" $ "components" (list "trainer")). */}}
{{- define "saintpipe.peers" -}}
- podSelector:
    matchLabels:
      app.kubernetes.io/name: {{ include "saintpipe.name" .ctx }}
      app.kubernetes.io/instance: {{ .ctx.Release.Name }}
    matchExpressions:
      - key: app.kubernetes.io/component
        operator: In
        values: {{ toJson .components }}
{{- end -}}

{{/* An ingress rule opening a metrics port to networkPolicy.metricsFrom: (dict "from" $peers "port" 9100). */}}
{{- define "saintpipe.metricsIngress" -}}
{{- if .from -}}
- from:
    {{- toYaml .from | nindent 4 }}
  ports:
    - port: {{ .port }}
      protocol: TCP
{{- end }}
{{- end -}}
