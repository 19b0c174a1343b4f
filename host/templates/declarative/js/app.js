// {{name}}: a declarative kubewasm controller plugin.
//
// Every ConfigMap labeled `{{name}}.example.com/enabled=true` is a parent whose one child is a
// summary ConfigMap, `<name>-summary`, that lists the keys of its data. `sync` answers what the
// children should be; the host creates the summary owned by its parent (so Kubernetes deletes it
// with the parent), applies changes in place, and deletes children no longer answered.
//
// `manifest` says what the parents and children are; `sync` is the logic.

import { Composite, Manifest, SettingsError, UpdateStrategy, kinds, objects as o } from '@kubewasm/sdk';

// The label that makes a ConfigMap a parent.
const LABEL = '{{name}}.example.com/enabled';

export default class Summarizer extends Composite {
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
      .child(kinds.CONFIG_MAP, UpdateStrategy.IN_PLACE);
  }

  sync(request, ctx) {
    const cm = request.parent;
    const keys = Object.keys(cm.data ?? {}).sort();
    const summary = o.newObject(kinds.CONFIG_MAP, `${o.name(cm)}-${this.suffix}`, o.namespace(cm), {
      data: { source: o.name(cm), keys: keys.join(','), count: String(keys.length) },
    });
    ctx.info(`${keys.length} keys in ${o.name(cm)}`);
    // A ConfigMap has no status: none leaves it alone.
    return { children: [summary] };
  }
}
