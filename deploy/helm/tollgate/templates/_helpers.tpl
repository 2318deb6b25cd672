{{/* Names. */}}
{{- define "tollgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "tollgate.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "tollgate.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "tollgate.serviceAccount" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tollgate.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "tollgate.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* Secrets and ConfigMaps: rendered here, or named by an existing* value. */}}
{{- define "tollgate.policyConfigMap" -}}
{{- default (printf "%s-policy" (include "tollgate.fullname" .)) .Values.policy.existingConfigMap -}}
{{- end -}}
{{- define "tollgate.catalogConfigMap" -}}
{{- default (printf "%s-catalog" (include "tollgate.fullname" .)) .Values.catalog.existingConfigMap -}}
{{- end -}}
{{- define "tollgate.apiTLSSecret" -}}
{{- if .Values.tls.certManager.enabled -}}{{ include "tollgate.fullname" . }}-api-tls{{- else -}}{{ .Values.tls.api.existingSecret }}{{- end -}}
{{- end -}}
{{- define "tollgate.listenerTLSSecret" -}}
{{- if .Values.tls.certManager.enabled -}}{{ include "tollgate.fullname" . }}-executor-listener-tls{{- else -}}{{ .Values.tls.executorListener.existingSecret }}{{- end -}}
{{- end -}}
{{- define "tollgate.clientTLSSecret" -}}
{{- if .Values.tls.certManager.enabled -}}{{ include "tollgate.fullname" . }}-executor-client-tls{{- else -}}{{ .Values.tls.executorClient.existingSecret }}{{- end -}}
{{- end -}}

{{/* The Services' DNS names, as the certificates must carry them. */}}
{{- define "tollgate.dnsNames" -}}
{{- $ns := .root.Release.Namespace -}}
- {{ .svc }}
- {{ .svc }}.{{ $ns }}
- {{ .svc }}.{{ $ns }}.svc
- {{ .svc }}.{{ $ns }}.svc.cluster.local
{{- end -}}

{{/* A Go duration of whole seconds, minutes or hours as seconds. */}}
{{- define "tollgate.seconds" -}}
{{- $d := . | toString -}}
{{- if hasSuffix "ms" $d -}}{{ div (trimSuffix "ms" $d | int) 1000 }}
{{- else if hasSuffix "s" $d -}}{{ trimSuffix "s" $d | int }}
{{- else if hasSuffix "m" $d -}}{{ mul (trimSuffix "m" $d | int) 60 }}
{{- else if hasSuffix "h" $d -}}{{ mul (trimSuffix "h" $d | int) 3600 }}
{{- else -}}{{ fail (printf "%q: give a duration in whole ms, s, m or h (e.g. 20s)" $d) }}
{{- end -}}
{{- end -}}

{{/*
The combinations that cannot run, refused at render time with the reason.
values.schema.json checks each value's type and range; these check values
against each other.
*/}}
{{- define "tollgate.validate" -}}
{{- $v := .Values -}}
{{- if $v.dev -}}
  {{- if $v.redis.url -}}{{ fail "dev: true runs the embedded store: drop redis.url, or set dev: false" }}{{- end -}}
  {{- if $v.controlPlane.hpa.enabled -}}{{ fail "dev: true runs one replica (the embedded store is the pod's memory): controlPlane.hpa.enabled must be false" }}{{- end -}}
{{- else -}}
  {{- if not $v.redis.url -}}{{ fail "redis.url is required: Tollgate keeps runs and parked questions in an external Redis (or set dev: true to try the chart with the embedded store)" }}{{- end -}}
  {{- if regexMatch "://[^/@]*:[^/@]*@" $v.redis.url -}}{{ fail "redis.url carries a password: it would be in the pod spec for anyone who can read it; put it in a Secret and name it in redis.password.existingSecret" }}{{- end -}}
  {{- if and $v.redis.ca.existingSecret (not (hasPrefix "rediss" $v.redis.url)) -}}{{ fail "redis.ca is for TLS: redis.url must be rediss:// (or rediss+cluster://)" }}{{- end -}}
  {{- if not (or $v.policy.csv $v.policy.existingConfigMap) -}}{{ fail "policy.csv (or policy.existingConfigMap) is required: who may decide what" }}{{- end -}}
  {{- if and $v.policy.csv $v.policy.existingConfigMap -}}{{ fail "give policy.csv or policy.existingConfigMap, not both" }}{{- end -}}
  {{- if not $v.grantKey.existingSecret -}}{{ fail "grantKey.existingSecret is required: a Secret with grant.key (Ed25519 PKCS#8 PEM) and grant.pub, the same for every replica (README: Keys and certificates)" }}{{- end -}}
  {{- if and (not $v.oidc.issuer) (not (and $v.jwt.existingSecret $v.jwt.keyIDs)) -}}{{ fail "jwt.existingSecret and jwt.keyIDs (or oidc.issuer) are required: who signs the tokens callers present" }}{{- end -}}
  {{- if and $v.jwt.keyIDs (not $v.jwt.existingSecret) -}}{{ fail "jwt.keyIDs names keys: give jwt.existingSecret, the Secret that holds them" }}{{- end -}}
  {{- if and $v.oidc.issuer (not $v.oidc.clientID) -}}{{ fail "oidc.clientID is required with oidc.issuer: the client people sign in with, and the audience of their tokens" }}{{- end -}}
  {{- if not $v.tls.certManager.enabled -}}
    {{- if and $v.tls.api.enabled (not $v.tls.api.existingSecret) -}}{{ fail "tls.api.existingSecret is required (or tls.certManager.enabled, or tls.api.enabled: false behind a mesh that ends TLS)" }}{{- end -}}
    {{- if not $v.tls.executorListener.existingSecret -}}{{ fail "tls.executorListener.existingSecret is required (or tls.certManager.enabled): executors connect over mTLS only" }}{{- end -}}
    {{- if and $v.executor.enabled (not $v.tls.executorClient.existingSecret) -}}{{ fail "tls.executorClient.existingSecret is required for the chart's executors (or tls.certManager.enabled, or executor.enabled: false)" }}{{- end -}}
  {{- else if not $v.tls.certManager.issuerRef.name -}}
    {{- fail "tls.certManager.issuerRef.name is required with tls.certManager.enabled" -}}
  {{- end -}}
{{- end -}}
{{- if and $v.catalog.yaml $v.catalog.existingConfigMap -}}{{ fail "give catalog.yaml or catalog.existingConfigMap, not both" }}{{- end -}}
{{- $web := $v.web -}}
{{- if $web.enabled -}}
  {{- if $v.dev -}}{{ fail "web.enabled: dev: true serves the web inbox (the dev picker) on the pod's loopback already, at web.port: kubectl port-forward it; set web.enabled: false" }}{{- end -}}
  {{- if not $web.url -}}{{ fail "web.url is required with web.enabled: the https address browsers reach the inbox at (https://inbox.example.com); links in notices and the OpenID redirect are made from it" }}{{- end -}}
  {{- if not (hasPrefix "https://" $web.url) -}}{{ fail (printf "web.url %q must be https://: sign-in and session cookies cross the network (end TLS at an Ingress, or serve it with tls.api)" $web.url) }}{{- end -}}
  {{- if not $web.key.existingSecret -}}{{ fail "web.key.existingSecret is required with web.enabled: a Secret holding at least 32 random bytes (key web.key.key) that seal sessions and sign links, the same for every replica (README: Approvers in a browser)" }}{{- end -}}
  {{- if not $v.oidc.issuer -}}{{ fail "web.enabled needs oidc.issuer (and oidc.clientID): people sign in to the inbox at your OpenID provider, and nobody could sign in otherwise" }}{{- end -}}
  {{- if has ($web.port | int) (list ($v.controlPlane.ports.api | int) ($v.controlPlane.ports.executor | int) ($v.controlPlane.ports.admin | int)) -}}{{ fail (printf "web.port %d is already a port of controlPlane.ports: give the inbox its own" ($web.port | int)) }}{{- end -}}
{{- else -}}
  {{- if $web.ingress.enabled -}}{{ fail "web.ingress.enabled needs web.enabled: the Ingress leads to the web inbox's Service" }}{{- end -}}
{{- end -}}
{{- $mcp := $v.mcp -}}
{{- if $mcp.enabled -}}
  {{- if $v.dev -}}{{ fail "mcp.enabled: dev: true serves the MCP gateway on the pod's loopback already, at mcp.port: kubectl port-forward it; set mcp.enabled: false" }}{{- end -}}
  {{- if not $v.tls.api.enabled -}}{{ fail "mcp.enabled needs tls.api.enabled: agents' bearer tokens cross the MCP gateway, and the control plane refuses --mcp-listen off loopback over plain HTTP (behind a mesh or proxy that ends TLS too); enable tls.api, or keep mcp.enabled: false" }}{{- end -}}
{{- else if and $mcp.pending (not $v.dev) -}}
  {{- fail "mcp.pending needs mcp.enabled: it changes how the MCP gateway answers a call that waits" -}}
{{- end -}}
{{- if or $mcp.enabled $v.dev -}}
  {{- $taken := list ($v.controlPlane.ports.api | int) ($v.controlPlane.ports.executor | int) ($v.controlPlane.ports.admin | int) -}}
  {{- if or $web.enabled $v.dev -}}{{- $taken = append $taken ($web.port | int) -}}{{- end -}}
  {{- if has ($mcp.port | int) $taken -}}{{ fail (printf "mcp.port %d is already a port of controlPlane.ports or web.port: give the MCP gateway its own" ($mcp.port | int)) }}{{- end -}}
{{- end -}}
{{- $slack := $v.slack -}}
{{- if $slack.enabled -}}
  {{- if $v.dev -}}{{ fail "slack.enabled: dev: true is for trying the chart in the pod; set slack.enabled: false (or dev: false)" }}{{- end -}}
  {{- if not $slack.tokenSecret.existingSecret -}}{{ fail "slack.tokenSecret.existingSecret is required with slack.enabled: a Secret holding the bot token (xoxb-…) that posts asks" }}{{- end -}}
  {{- if and $slack.signingSecret.existingSecret (not $web.enabled) -}}{{ fail "slack.signingSecret.existingSecret needs web.enabled: Slack's Approve and Reject buttons call the web listener (web.url/slack/interactions); enable the web inbox, or drop the signing secret (messages without buttons)" }}{{- end -}}
  {{- if not (or $slack.channel $slack.dm) -}}{{ fail "slack.enabled posts nowhere: give slack.channel (a channel id), or slack.dm with slack.users" }}{{- end -}}
{{- end -}}
{{- $pdb := $v.controlPlane.pdb -}}
{{- if and $pdb.enabled (not $v.dev) -}}
  {{- if and (ne (toString $pdb.minAvailable) "") (ne (toString $pdb.maxUnavailable) "") -}}{{ fail "controlPlane.pdb: give minAvailable or maxUnavailable, not both (set the other to \"\")" }}{{- end -}}
  {{- if and (eq (toString $pdb.minAvailable) "") (eq (toString $pdb.maxUnavailable) "") -}}{{ fail "controlPlane.pdb: give minAvailable or maxUnavailable" }}{{- end -}}
  {{- $least := $v.controlPlane.replicas | int -}}
  {{- if $v.controlPlane.hpa.enabled -}}{{- $least = $v.controlPlane.hpa.minReplicas | int -}}{{- end -}}
  {{- if lt $least 2 -}}{{ fail "controlPlane.pdb with fewer than 2 replicas blocks every node drain: give 2 or more replicas (hpa.minReplicas), or pdb.enabled: false" }}{{- end -}}
  {{- /* Pods a value stands for, as Kubernetes counts a percentage: rounded up. */ -}}
  {{- $min := include "tollgate.pdbCount" (dict "v" $pdb.minAvailable "n" $least) | int -}}
  {{- $max := include "tollgate.pdbCount" (dict "v" $pdb.maxUnavailable "n" $least) | int -}}
  {{- if and (ne (toString $pdb.minAvailable) "") (ge $min $least) -}}{{ fail (printf "controlPlane.pdb.minAvailable %v leaves no replica of %d disruptable: a node drain would never finish" $pdb.minAvailable $least) }}{{- end -}}
  {{- if and (ne (toString $pdb.minAvailable) "") (lt $min 1) -}}{{ fail (printf "controlPlane.pdb.minAvailable %v keeps no replica available" $pdb.minAvailable) }}{{- end -}}
  {{- if and (ne (toString $pdb.maxUnavailable) "") (ge $max $least) -}}{{ fail (printf "controlPlane.pdb.maxUnavailable %v may take all %d replicas down at once" $pdb.maxUnavailable $least) }}{{- end -}}
  {{- if and (ne (toString $pdb.maxUnavailable) "") (lt $max 1) -}}{{ fail (printf "controlPlane.pdb.maxUnavailable %v lets no replica be disrupted: a node drain would never finish" $pdb.maxUnavailable) }}{{- end -}}
{{- end -}}
{{- if $v.controlPlane.hpa.enabled -}}
  {{- if gt ($v.controlPlane.hpa.minReplicas | int) ($v.controlPlane.hpa.maxReplicas | int) -}}{{ fail "controlPlane.hpa.minReplicas is above maxReplicas" }}{{- end -}}
{{- end -}}
{{- $grace := $v.controlPlane.terminationGracePeriodSeconds | int -}}
{{- $need := add (include "tollgate.seconds" $v.controlPlane.drainDelay | int) (include "tollgate.seconds" $v.controlPlane.drainTimeout | int) -}}
{{- if le $grace (int $need) -}}{{ fail (printf "controlPlane.terminationGracePeriodSeconds (%d) must exceed drainDelay + drainTimeout (%ds): the kubelet would kill a replica mid-drain" $grace (int $need)) }}{{- end -}}
{{- $egrace := $v.executor.terminationGracePeriodSeconds | int -}}
{{- /* The executor waits up to 5 s more after its drain timeout to report; 10 s of margin. */ -}}
{{- $eneed := add (include "tollgate.seconds" $v.executor.drainTimeout | int) 10 -}}
{{- if lt $egrace (int $eneed) -}}{{ fail (printf "executor.terminationGracePeriodSeconds (%d) must be at least executor.drainTimeout + 10 s (%ds): the kubelet would kill steps mid-run" $egrace (int $eneed)) }}{{- end -}}
{{- end -}}

{{/* The hardened security contexts every pod and container gets. */}}
{{- define "tollgate.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}
{{- define "tollgate.containerSecurityContext" -}}
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
{{- end -}}

{{- define "tollgate.executorConfig" -}}
id: {{ .Values.executor.name }}
# The control plane's executor Service: each stream reaches one replica;
# a broken stream is opened again, on the next address in turn.
control_plane: {{ (include "tollgate.fullname" .) }}-executor.{{ .Release.Namespace }}.svc:{{ .Values.controlPlane.ports.executor }}
{{- with .Values.executor.extraControlPlanes }}
control_planes:
  {{- toYaml . | nindent 2 }}
{{- end }}
tls:
  cert: /etc/tollgate/tls/client/tls.crt
  key: /etc/tollgate/tls/client/tls.key
  ca: /etc/tollgate/tls/client/ca.crt
grant_keys:
  grant: /etc/tollgate/grant/grant.pub
labels: {{ toJson .Values.executor.labels }}
capacity: {{ .Values.executor.capacity }}
mcp_servers:
  {{- toYaml .Values.executor.mcpServers | nindent 2 }}
{{- if .Values.executor.model.baseURL }}
model:
  base_url: {{ .Values.executor.model.baseURL }}
  model: {{ .Values.executor.model.model }}
  {{- if .Values.executor.model.existingSecret }}
  api_key_env: TOLLGATE_MODEL_API_KEY
  {{- end }}
{{- end }}
{{- with .Values.telemetry.otlpEndpoint }}
telemetry:
  otlp_endpoint: {{ . }}
  insecure: {{ $.Values.telemetry.insecure }}
{{- end }}
{{- end -}}


{{/* tollgate.pdbCount: the pods a PDB value (an integer or "N%") stands for among n, rounded up. */}}
{{- define "tollgate.pdbCount" -}}
{{- $s := toString .v -}}
{{- if hasSuffix "%" $s -}}
{{- div (add (mul (trimSuffix "%" $s | int) .n) 99) 100 -}}
{{- else -}}
{{- $s | int -}}
{{- end -}}
{{- end -}}
