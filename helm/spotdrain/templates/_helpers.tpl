{{/* Names and labels shared by every template. */}}

{{- define "spotdrain.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "spotdrain.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "spotdrain.selectorLabels" -}}
app.kubernetes.io/name: {{ include "spotdrain.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: {{ .Values.mode }}
{{- end }}

{{- define "spotdrain.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "spotdrain.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The one name of the agent's (or the controller's) service account: its pods, its RBAC bindings, the
     admission policy and the eviction webhook's agent users all use this. */}}
{{- define "spotdrain.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "spotdrain.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* "true" when the drain engine may delete pods (drain.policy force, the default), else empty. */}}
{{- define "spotdrain.forceDrain" -}}
{{- $drain := default (dict) (get (default (dict) .Values.config) "drain") }}
{{- if eq (default "force" (get $drain "policy")) "force" }}true{{ end }}
{{- end }}

{{/* "true" when the API server has what the admission objects need: ValidatingAdmissionPolicy v1 and a
webhook's matchConditions, both GA in Kubernetes 1.30 (the policy's kind in discovery says so). The chart
installs on older API servers its kubeVersion admits, without the policy and the webhook. */}}
{{- define "spotdrain.admissionAPI" -}}
{{- if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy" }}true{{ end }}
{{- end }}

{{/* "true" when the controller's pods serve the eviction webhook (controller mode), else empty. */}}
{{- define "spotdrain.evictionWebhook" -}}
{{- if and (eq .Values.mode "controller") .Values.controller.evictionWebhook.enabled (include "spotdrain.admissionAPI" .) }}true{{ end }}
{{- end }}

{{/* "true" when an agent release runs the webhook in a Deployment of its own (`spotdrain admission`). */}}
{{- define "spotdrain.admission" -}}
{{- if and (eq .Values.mode "agent") .Values.agent.evictionWebhook.enabled (include "spotdrain.admissionAPI" .) }}true{{ end }}
{{- end }}

{{/* "true" when this release renders the webhook's Service, certificate and configuration, either way. */}}
{{- define "spotdrain.webhook" -}}
{{- if or (include "spotdrain.evictionWebhook" .) (include "spotdrain.admission" .) }}true{{ end }}
{{- end }}

{{/* The admission Deployment's name, and its pods' labels (the Service selects these in agent mode). */}}
{{- define "spotdrain.admissionName" -}}
{{- printf "%s-admission" (include "spotdrain.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "spotdrain.admissionSelectorLabels" -}}
app.kubernetes.io/name: {{ include "spotdrain.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: admission
{{- end }}

{{/* The agents' usernames: "system:serviceaccount:NS:NAME", comma-separated (no service account name or
     namespace holds a comma). An agent release's webhook judges its own agents; a controller's, those of
     each agent release it names. */}}
{{- define "spotdrain.agentUsers" -}}
{{- if eq .Values.mode "agent" }}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "spotdrain.serviceAccountName" .) }}
{{- else }}
{{- $users := list }}
{{- range (required "controller.evictionWebhook.agentServiceAccounts must name the agents' service accounts" .Values.controller.evictionWebhook.agentServiceAccounts) }}
{{- $users = append $users (printf "system:serviceaccount:%s:%s" .namespace .name) }}
{{- end }}
{{- join "," $users }}
{{- end }}
{{- end }}

{{/* The webhook's settings: agent.evictionWebhook in agent mode, controller.evictionWebhook otherwise. */}}
{{- define "spotdrain.webhookValues" -}}
{{- if eq .Values.mode "agent" }}
{{- toYaml .Values.agent.evictionWebhook }}
{{- else }}
{{- toYaml .Values.controller.evictionWebhook }}
{{- end }}
{{- end }}

{{/* The controller.admission_* keys: where the webhook listens, its certificate as mounted, whom it
     judges (the same for the controller's pods and the admission Deployment's). */}}
{{- define "spotdrain.admissionKeys" -}}
{{- $wh := include "spotdrain.webhookValues" . | fromYaml }}
admission_listen: {{ printf "0.0.0.0:%d" (int $wh.port) | quote }}
admission_cert_file: /etc/spotdrain/webhook-tls/tls.crt
admission_key_file: /etc/spotdrain/webhook-tls/tls.key
admission_agent_users:
  {{- toYaml (include "spotdrain.agentUsers" . | splitList ",") | nindent 2 }}
{{- end }}

{{/* The admission Deployment's spotdrain.yaml: the user's log and alerts, the webhook's keys. */}}
{{- define "spotdrain.admissionConfig" -}}
{{- $user := default (dict) .Values.config }}
{{- $cfg := dict "metrics_listen" (printf "0.0.0.0:%d" (int .Values.metrics.port)) }}
{{- with get $user "log" }}
{{- $_ := set $cfg "log" (deepCopy .) }}
{{- end }}
{{- $alerts := deepCopy (default (dict) (get $user "alerts")) }}
{{- if .Values.alerts.webhook.existingSecret }}
{{- $_ := set $alerts "webhook_url" "file:/etc/spotdrain/webhook/url" }}
{{- end }}
{{- if $alerts }}
{{- $_ := set $cfg "alerts" $alerts }}
{{- end }}
{{- $_ := set $cfg "controller" (include "spotdrain.admissionKeys" . | fromYaml) }}
{{- toYaml $cfg }}
{{- end }}

{{/* The ConfigMap the stop and startup estimates are kept in (config.drain.estimates_configmap; empty:
     none kept). */}}
{{- define "spotdrain.estimatesConfigMap" -}}
{{- $drain := default (dict) (get (default (dict) .Values.config) "drain") }}
{{- if hasKey $drain "estimates_configmap" }}{{ $drain.estimates_configmap }}{{ else }}spotdrain-estimates{{ end }}
{{- end }}

{{- define "spotdrain.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* spotdrain.yaml: the user's config with the keys the chart owns set from the chart's values. */}}
{{- define "spotdrain.config" -}}
{{- $cfg := deepCopy (default (dict) .Values.config) }}
{{- if eq .Values.mode "agent" }}
{{- /* The DaemonSet passes --metrics-listen with the node's own address (HOST_IP); without it, loopback. */}}
{{- $_ := set $cfg "metrics_listen" (printf "127.0.0.1:%d" (int .Values.metrics.port)) }}
{{- else }}
{{- $_ := set $cfg "metrics_listen" (printf "0.0.0.0:%d" (int .Values.metrics.port)) }}
{{- end }}
{{- if eq .Values.mode "controller" }}
{{- $aws := deepCopy (default (dict) (get $cfg "aws")) }}
{{- $_ := set $aws "queue_url" (required "controller.queueURL is required in controller mode" .Values.controller.queueURL) }}
{{- if .Values.controller.region }}
{{- $_ := set $aws "region" .Values.controller.region }}
{{- end }}
{{- $_ := set $cfg "aws" $aws }}
{{- if include "spotdrain.evictionWebhook" . }}
{{- $ctl := deepCopy (default (dict) (get $cfg "controller")) }}
{{- $ctl = merge (include "spotdrain.admissionKeys" . | fromYaml) $ctl }}
{{- $_ := set $cfg "controller" $ctl }}
{{- end }}
{{- else if .Values.agent.imdsEndpoint }}
{{- $imds := deepCopy (default (dict) (get $cfg "imds")) }}
{{- $_ := set $imds "endpoint" .Values.agent.imdsEndpoint }}
{{- $_ := set $cfg "imds" $imds }}
{{- end }}
{{- if .Values.alerts.webhook.existingSecret }}
{{- $alerts := deepCopy (default (dict) (get $cfg "alerts")) }}
{{- $_ := set $alerts "webhook_url" "file:/etc/spotdrain/webhook/url" }}
{{- $_ := set $cfg "alerts" $alerts }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/* The pod template, the same for both modes but for the parts that differ. */}}
{{- define "spotdrain.podTemplate" -}}
metadata:
  labels:
    {{- include "spotdrain.selectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    checksum/config: {{ include "spotdrain.config" . | sha256sum }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "spotdrain.serviceAccountName" . }}
  automountServiceAccountToken: {{ .Values.serviceAccount.automountServiceAccountToken }}
  {{- with .Values.image.pullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  {{- if eq .Values.mode "agent" }}
  priorityClassName: {{ .Values.agent.priorityClassName }}
  hostNetwork: {{ .Values.agent.hostNetwork }}
  dnsPolicy: {{ .Values.agent.dnsPolicy }}
  # The image is Linux's: never on a Windows node of a mixed cluster.
  nodeSelector:
    kubernetes.io/os: linux
    {{- with .Values.agent.nodeSelector }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- if .Values.agent.affinity }}
  affinity:
    {{- toYaml .Values.agent.affinity | nindent 4 }}
  {{- else if .Values.agent.spotNodeAffinity.enabled }}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          {{- range .Values.agent.spotNodeAffinity.terms }}
          - matchExpressions:
              - key: {{ .key }}
                operator: In
                values:
                  {{- toYaml .values | nindent 18 }}
          {{- end }}
  {{- end }}
  {{- with .Values.agent.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- else }}
  priorityClassName: {{ .Values.controller.priorityClassName }}
  # The image is Linux's: never on a Windows node of a mixed cluster.
  nodeSelector:
    kubernetes.io/os: linux
    {{- with .Values.controller.nodeSelector }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.controller.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.controller.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.controller.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- end }}
  # A drain under way gets to finish: the spot budget is two minutes.
  terminationGracePeriodSeconds: 150
  containers:
    - name: spotdrain
      image: {{ include "spotdrain.image" . }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      {{- if eq .Values.mode "agent" }}
      # The agent's own binary: the same code without the simulator's.
      command:
        - /usr/local/bin/spotdrain-agent
      {{- end }}
      args:
        - {{ .Values.mode }}
        - --config
        - /etc/spotdrain/spotdrain.yaml
        {{- if .Values.dryRun }}
        # shadow mode: heard, planned, alerted and counted, nothing written (docs/operations.md)
        - --dry-run
        {{- end }}
        {{- if eq .Values.mode "agent" }}
        # The node's own address, never every address of a host-network pod; brackets serve IPv4 and IPv6.
        - --metrics-listen
        - "[$(HOST_IP)]:{{ .Values.metrics.port }}"
        {{- end }}
      env:
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        {{- if eq .Values.mode "agent" }}
        - name: NODE_NAME
          valueFrom:
            fieldRef:
              fieldPath: spec.nodeName
        # The address /metrics, /healthz and /readyz are served on: the node's primary IP with host
        # networking (the probes and Prometheus reach the pod there), else the pod's own.
        - name: HOST_IP
          valueFrom:
            fieldRef:
              fieldPath: {{ if .Values.agent.hostNetwork }}status.hostIP{{ else }}status.podIP{{ end }}
        {{- end }}
        {{- if .Values.alerts.webhook.existingSecret }}
        - name: SPOTDRAIN_ALERTS_WEBHOOK_FORMAT
          value: {{ .Values.alerts.webhook.format | quote }}
        {{- with .Values.alerts.webhook.template }}
        - name: SPOTDRAIN_ALERTS_WEBHOOK_TEMPLATE
          value: {{ . | quote }}
        {{- end }}
        {{- if .Values.alerts.webhook.headersSecret }}
        - name: SPOTDRAIN_ALERTS_WEBHOOK_HEADERS_FILE
          value: /etc/spotdrain/webhook-headers/headers
        {{- end }}
        {{- end }}
        {{- with .Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        - name: metrics
          containerPort: {{ .Values.metrics.port }}
          protocol: TCP
        {{- if include "spotdrain.evictionWebhook" . }}
        - name: webhook
          containerPort: {{ .Values.controller.evictionWebhook.port }}
          protocol: TCP
        {{- end }}
      livenessProbe:
        httpGet:
          path: /healthz
          port: metrics
        periodSeconds: 10
        failureThreshold: 6
      readinessProbe:
        httpGet:
          path: /readyz
          port: metrics
        periodSeconds: 5
      resources:
        {{- include "spotdrain.resources" (list . (eq .Values.mode "agent" | ternary .Values.agent.resources .Values.controller.resources)) | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: config
          mountPath: /etc/spotdrain/spotdrain.yaml
          subPath: spotdrain.yaml
          readOnly: true
        {{- if include "spotdrain.evictionWebhook" . }}
        - name: webhook-tls
          mountPath: /etc/spotdrain/webhook-tls
          readOnly: true
        {{- end }}
        {{- if .Values.alerts.webhook.existingSecret }}
        - name: webhook
          mountPath: /etc/spotdrain/webhook
          readOnly: true
        {{- if .Values.alerts.webhook.headersSecret }}
        - name: webhook-headers
          mountPath: /etc/spotdrain/webhook-headers
          readOnly: true
        {{- end }}
        {{- end }}
  volumes:
    - name: config
      configMap:
        name: {{ include "spotdrain.fullname" . }}
    {{- if include "spotdrain.evictionWebhook" . }}
    - name: webhook-tls
      secret:
        secretName: {{ include "spotdrain.fullname" . }}-webhook-tls
        defaultMode: 0440
        items:
          - key: tls.crt
            path: tls.crt
          - key: tls.key
            path: tls.key
    {{- end }}
    {{- if .Values.alerts.webhook.existingSecret }}
    - name: webhook
      secret:
        secretName: {{ .Values.alerts.webhook.existingSecret }}
        defaultMode: 0440
        items:
          - key: {{ .Values.alerts.webhook.secretKey }}
            path: url
    {{- if .Values.alerts.webhook.headersSecret }}
    - name: webhook-headers
      secret:
        secretName: {{ .Values.alerts.webhook.headersSecret }}
        defaultMode: 0440
        items:
          - key: {{ .Values.alerts.webhook.headersSecretKey }}
            path: headers
    {{- end }}
    {{- end }}
{{- end }}

{{/* A component's requests and limits: the top-level `resources` when set (it replaces every component's),
else the component's own. Called with (list $ COMPONENT_RESOURCES). */}}
{{- define "spotdrain.resources" -}}
{{- $top := index . 0 -}}
{{- toYaml ($top.Values.resources | default (index . 1)) -}}
{{- end }}
