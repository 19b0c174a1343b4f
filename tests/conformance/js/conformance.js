// The SDK conformance plugin in JavaScript: what each `data.do` of a primary ConfigMap and each
// `do` annotation of a watched Secret makes it do is in tests/conformance/README.md, the same in
// every language.

import { Action, Controller, Invalid, KubewasmError, Manifest, Mapping, Other, kinds, objectKey, objects as o } from '@kubewasm/sdk';

export default class Conformance extends Controller {
  static settingsDefaults = { prefix: 'conformance' };

  manifest() {
    return new Manifest('conformance', '0.1.0').primary(kinds.CONFIG_MAP).watches(kinds.SECRET, Mapping.mapRelated()).permission(kinds.CONFIG_MAP, ['patch']);
  }

  reconcile(cm, ctx) {
    const data = cm.data ?? {};
    switch (data.do ?? 'done') {
      case 'done':
        return Action.done();
      case 'requeue':
        // JavaScript's unit of time is the millisecond.
        return Action.requeueAfter(Number(data['after-us']) / 1000);
      case 'error':
        throw KubewasmError.fromCode(data.code, `${this.settings.prefix}: ${data.code}`);
      case 'long-error':
        throw new Other('é'.repeat(40000));
      case 'panic':
        throw new Error('conformance panics on purpose');
      case 'get-long-name':
        ctx.get(kinds.CONFIG_MAP, o.namespace(cm), 'a'.repeat(254));
        break;
      case 'list-long-selector':
        ctx.list(kinds.CONFIG_MAP, o.namespace(cm), 'a'.repeat(4097));
        break;
      case 'event-long-note':
        ctx.event(cm, 'normal', 'Checked', 'Reconcile', 'n'.repeat(1025));
        break;
      case 'event-empty-reason':
        ctx.event(cm, 'normal', '', 'Reconcile', '');
        break;
      case 'read-pod':
        ctx.get(kinds.POD, o.namespace(cm), 'x');
        break;
      default:
        throw new Other(`unknown do ${JSON.stringify(data.do)}`);
    }
    return Action.done();
  }

  mapRelated(_resource, secret) {
    const action = o.annotation(secret, 'do');
    if (action === 'panic') throw new Error('conformance panics on purpose in map-related');
    if (action === 'error') throw new Invalid('conformance fails map-related on purpose');
    const primary = o.label(secret, 'primary');
    return primary ? [objectKey(o.namespace(secret), primary)] : [];
  }
}
