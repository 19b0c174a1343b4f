// Metacontroller's crd-roles example as a kubewasm declarative plugin, in JavaScript.
//
// Every CustomResourceDefinition annotated `enable-default-roles` (any value) gets a ClusterRole
// `<crd name>-reader`, owned by the CRD: the API server's garbage collector deletes it with the
// CRD. As in the original hook, the role has no rules yet (`rules: []`). A CRD without the
// annotation has no role, and a role it had is deleted. The CRD's status is the API server's:
// the plugin answers none, and the host leaves it alone.

import { Composite, Manifest, UpdateStrategy, gvk, kinds, objects as o } from '@kubewasm/sdk';

export const CRD = gvk('apiextensions.k8s.io', 'v1', 'CustomResourceDefinition');
export const ANNOTATION = 'enable-default-roles';

/** The ClusterRole a CRD gets: `<crd name>-reader`, no rules (as Metacontroller's sync.py). */
export function readerRole(crd) {
  return o.newObject(kinds.CLUSTER_ROLE, `${o.name(crd)}-reader`, undefined, { rules: [] });
}

export default class CrdRoles extends Composite {
  manifest() {
    return new Manifest('crd-roles', '0.1.0')
      .primary(CRD) // the parent: every CRD (the annotation decides, in sync)
      .child(kinds.CLUSTER_ROLE, UpdateStrategy.ON_DELETE); // created once, never updated
  }

  sync({ parent }, ctx) {
    const enabled = o.hasAnnotation(parent, ANNOTATION);
    ctx.debug('sync', { crd: o.name(parent), enabled });
    // No status: a CRD's status is the API server's (a none status leaves it as it is).
    return { children: enabled ? [readerRole(parent)] : [] };
  }
}
