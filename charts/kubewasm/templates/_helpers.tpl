{{/* The host's name: its ServiceAccount, Deployment, Lease, Service and roles. */}}
{{- define "kubewasm.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Cluster-scoped objects carry the release namespace: two releases may share a name. */}}
{{- define "kubewasm.clusterName" -}}
{{- printf "kubewasm:%s:%s" .Release.Namespace (include "kubewasm.fullname" .) -}}
{{- end -}}

{{- define "kubewasm.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kubewasm.labels" -}}
{{ include "kubewasm.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The plugin's ServiceAccount, as the host names it (identity::service_account). */}}
{{- define "kubewasm.pluginAccount" -}}
kubewasm-plugin-{{ . }}
{{- end -}}

{{/* The status ConfigMap listing the running plugins; plugin load Events are about it. */}}
{{- define "kubewasm.statusConfigMap" -}}
{{ include "kubewasm.fullname" . }}-plugins
{{- end -}}

{{/*
The host's read of what a plugin rule lets the plugin watch: the shared informer lists and watches
the whole resource (and patches its shard and drain labels when `sharded`). Empty for rules that
grant no watch or name objects. Takes (dict "rule" RULE "sharded" BOOL).
*/}}
{{- define "kubewasm.readRule" -}}
{{- $rule := .rule -}}
{{- $verbs := $rule.verbs | default list -}}
{{- $resources := list -}}
{{- range $rule.resources -}}
{{- if not (contains "/" .) }}{{ $resources = append $resources . }}{{ end -}}
{{- end -}}
{{- if and (or (has "watch" $verbs) (has "*" $verbs)) (not $rule.resourceNames) $resources -}}
- apiGroups: {{ toJson $rule.apiGroups }}
  resources: {{ toJson $resources }}
  verbs: [get, list, watch{{ if .sharded }}, patch{{ end }}]
{{- end -}}
{{- end -}}

{{/* The Secret the host keeps its own webhook CA and certificate in (without cert-manager). */}}
{{- define "kubewasm.webhookCertSecret" -}}
{{ include "kubewasm.fullname" . }}-webhook-certs
{{- end -}}

{{/* Where a cert-manager certificate of the webhook server is mounted. */}}
{{- define "kubewasm.webhookCertDir" -}}
/etc/kubewasm/webhook-certs
{{- end -}}

{{/*
What the host's leader needs to write the webhook configurations (named after the host and each
plugin, whatever plugins come: not limited to names) and the conversion of `conversionCRDs`: it
lists the CRDs every round, to put back those no plugin converts any more.
*/}}
{{- define "kubewasm.webhookRules" -}}
- apiGroups: [admissionregistration.k8s.io]
  resources: [mutatingwebhookconfigurations, validatingwebhookconfigurations]
  verbs: [create, delete, get, list, patch]
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list]
{{- with .Values.webhooks.conversionCRDs }}
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  resourceNames: {{ toJson . }}
  verbs: [patch]
{{- end }}
{{- end -}}

{{/* The ring of the replicas when sharding is on: sharding.ring, else the release's full name. */}}
{{- define "kubewasm.shardRing" -}}
{{- .Values.sharding.ring | default (include "kubewasm.fullname" .) -}}
{{- end -}}

{{/* The ValidatingAdmissionPolicy (and its binding) guarding plugin identities in this release's
namespace: cluster-scoped, so named after the namespace. */}}
{{- define "kubewasm.identityPolicy" -}}
kubewasm-plugin-identity.{{ .Release.Namespace }}
{{- end -}}
