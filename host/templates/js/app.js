// {{name}}: a kubewasm controller plugin.
//
// Every ConfigMap labeled `{{name}}.example.com/enabled=true` gets a summary ConfigMap,
// `<name>-summary`, that lists the keys of its data and is owned by it (so Kubernetes deletes
// the summary with it). One server-side apply per reconcile; the host does the rest (watches,
// cache, queue, retries).
//
// `manifest` says what the plugin reconciles and what it may do; `reconcile` is the logic.

import { Action, Controller, Manifest, SettingsError, kinds, objects as o } from '@kubewasm/sdk';

// The label that selects the ConfigMaps this controller reconciles.
const LABEL = '{{name}}.example.com/enabled';

export default class Summarizer extends Controller {
  // Every setting the plugin takes, with its default: any other key in `{{name}}.toml` refuses
  // the plugin. A summary is named `<name>-<suffix>`.
  static settingsDefaults = { suffix: 'summary' };

  // `settings`: `{{name}}.toml` beside `{{name}}.wasm` in the host's plugin directory.
  constructor(settings) {
    super(settings);
    const { suffix } = settings;
    if (typeof suffix !== 'string' || suffix === '') {
      throw new SettingsError('suffix must be a non-empty string');
    }
    this.suffix = suffix;
  }

  manifest() {
    return new Manifest('{{name}}', '0.1.0')
      .primary(kinds.CONFIG_MAP)
      .primarySelector(`${LABEL}=true`)
      .permission(kinds.CONFIG_MAP, ['create', 'patch']);
  }

  reconcile(cm, ctx) {
    const keys = Object.keys(cm.data ?? {}).sort();
    const summary = o.newObject(kinds.CONFIG_MAP, `${o.name(cm)}-${this.suffix}`, o.namespace(cm), {
      data: { source: o.name(cm), keys: keys.join(','), count: String(keys.length) },
    });
    summary.metadata.ownerReferences = [o.controllerOwnerRef(cm)];
    ctx.apply(summary);
    ctx.info(`summarized ${keys.length} keys of ${o.name(cm)}`);
    return Action.done();
  }
}
