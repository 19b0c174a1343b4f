// {{name}}: a declarative kubewasm controller plugin.
//
// Every Namespace labeled `{{name}}.example.com/enabled=true` is a parent whose one child is a
// summary ConfigMap in it, `<namespace>-summary`, that lists the keys of the namespace's labels.
// `sync` answers what the children should be; the host creates the summary owned by its parent,
// applies changes in place, and deletes children no longer answered.
//
// `manifest` says what the parents and children are; `sync` is the logic.

import { Composite, Manifest, SettingsError, UpdateStrategy, kinds, objects as o } from '@kubewasm/sdk';

// The label that makes a Namespace a parent.
const LABEL = '{{name}}.example.com/enabled';

export default class Summarizer extends Composite {
  // Every setting the plugin takes, with its default: any other key in `{{name}}.toml` refuses
  // the plugin. A summary is named `<namespace>-<suffix>`.
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
      .primary(kinds.NAMESPACE)
      .primarySelector(`${LABEL}=true`)
      .child(kinds.CONFIG_MAP, UpdateStrategy.IN_PLACE);
  }

  sync(request, ctx) {
    const namespace = request.parent;
    const keys = Object.keys(o.labels(namespace)).sort();
    const summary = o.newObject(kinds.CONFIG_MAP, `${o.name(namespace)}-${this.suffix}`, o.name(namespace), {
      data: { source: o.name(namespace), keys: keys.join(','), count: String(keys.length) },
    });
    ctx.info(`${keys.length} labels on ${o.name(namespace)}`);
    // The Namespace's status is the API server's: none leaves it alone.
    return { children: [summary] };
  }
}
