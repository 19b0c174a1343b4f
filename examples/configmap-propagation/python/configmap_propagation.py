"""Metacontroller's configmappropagation example as a kubewasm declarative plugin, in Python.

A ConfigMapPropagation (examples.metacontroller.io/v1alpha1, cluster-scoped) names a source
ConfigMap (`spec.sourceNamespace` / `spec.sourceName`) and the namespaces it is copied into
(`spec.targetNamespaces`). For each propagation labelled `version=v1` the plugin answers one
ConfigMap per target namespace, named as the source and holding its `data`, and a status
counting the copies expected and the copies the propagation has; the host applies the copies
(in place when the source changes), deletes those no longer wanted, and writes the status.
While the source does not exist, no copy is wanted.
"""

from kubewasm import CompositeController, Gvk, Manifest, Mapping, Object, RelatedRule, SyncRequest, SyncResponse, UpdateStrategy, kinds
from kubewasm import objects as o

CONFIG_MAP_PROPAGATION = Gvk("examples.metacontroller.io", "v1alpha1", "ConfigMapPropagation")


class ConfigMapPropagation(CompositeController):
    def manifest(self) -> Manifest:
        return (
            Manifest("configmap-propagation", "0.1.0")
            # Metacontroller's parentResource, with its labelSelector.
            .primary(CONFIG_MAP_PROPAGATION)
            .primary_selector("version=v1")
            # childResources: ConfigMaps, updated in place (the generated selector is the default).
            .child(kinds.CONFIG_MAP, UpdateStrategy.IN_PLACE)
            # A change of a source ConfigMap syncs the propagations whose customize rule names it.
            .watches(kinds.CONFIG_MAP, Mapping.map_related())
        )

    def customize(self, parent: Object) -> list[RelatedRule]:
        source_namespace, source_name = _source(parent)
        if not source_namespace or not source_name:
            return []  # the CRD requires both; without them there is nothing to copy
        return [RelatedRule.named(kinds.CONFIG_MAP, [source_name], source_namespace)]

    def sync(self, request: SyncRequest) -> SyncResponse:
        parent = request.parent
        source_namespace, source_name = _source(parent)
        targets: list[str] = o.field(parent, "spec.targetNamespaces") or []
        status = {
            "expected_copies": len(targets),
            "actual_copies": len(request.children_of(kinds.CONFIG_MAP)),
        }
        source = next(
            (cm for cm in request.related_of(kinds.CONFIG_MAP) if (o.namespace(cm), o.name(cm)) == (source_namespace, source_name)),
            None,
        )
        if source is None:
            self.ctx.info("no source ConfigMap: no copies", propagation=o.name(parent), source=f"{source_namespace}/{source_name}")
            return SyncResponse(status=status, children=[])
        data = source.get("data") or {}
        copies = [o.new_object(kinds.CONFIG_MAP, source_name, namespace, data=data) for namespace in targets]
        return SyncResponse(status=status, children=copies)


def _source(parent: Object) -> tuple[str, str]:
    return o.field(parent, "spec.sourceNamespace") or "", o.field(parent, "spec.sourceName") or ""
