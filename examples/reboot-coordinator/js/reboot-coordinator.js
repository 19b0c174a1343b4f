// A node reboot coordinator as a kubewasm plugin, in JavaScript.
//
// A node agent annotates a Node `reboot.kubewasm.io/reboot-needed`. This controller grants
// `reboot.kubewasm.io/reboot-now: "true"` to waiting nodes while fewer than `maxUnavailable`
// nodes (a setting, default 1) are unavailable: rebooting (reboot-now set) or not Ready. The agent
// reboots a granted node and clears both annotations once it is back.
//
// Every Node event re-evaluates every waiting node (`mapRelated`), so a node coming back Ready
// lets the next one go.

import { Action, Controller, Manifest, Mapping, SettingsError, kinds, objectKey, objects as o } from '@kubewasm/sdk';

export const REBOOT_NEEDED = 'reboot.kubewasm.io/reboot-needed';
export const REBOOT_NOW = 'reboot.kubewasm.io/reboot-now';

export const isWaiting = (node) => o.hasAnnotation(node, REBOOT_NEEDED) && !o.hasAnnotation(node, REBOOT_NOW);
export const isUnavailable = (node) => o.hasAnnotation(node, REBOOT_NOW) || o.conditionStatus(node, 'Ready') !== 'True';

export default class RebootCoordinator extends Controller {
  // reboot-coordinator.toml: how many Nodes may be unavailable at once.
  static settingsDefaults = { maxUnavailable: 1 };

  constructor(settings) {
    super(settings);
    const { maxUnavailable } = settings;
    // As in the Rust version: an integer of at least 1. (JSON cannot tell 2.0 from 2: both are 2 here.)
    if (!Number.isSafeInteger(maxUnavailable) || maxUnavailable < 1) {
      throw new SettingsError(`maxUnavailable must be an integer of at least 1, not ${JSON.stringify(maxUnavailable)}`);
    }
    this.maxUnavailable = maxUnavailable;
  }

  manifest() {
    return new Manifest('reboot-coordinator', '0.1.0')
      .primary(kinds.NODE)
      .watches(kinds.NODE, Mapping.mapRelated())
      .permission(kinds.NODE, ['patch'])
      .maxConcurrency(1);
  }

  reconcile(node, ctx) {
    if (!isWaiting(node)) return Action.done();
    const unavailable = ctx.list(kinds.NODE).filter(isUnavailable).length;
    if (unavailable < this.maxUnavailable) {
      ctx.patch(kinds.NODE, undefined, o.name(node), { metadata: { annotations: { [REBOOT_NOW]: 'true' } } });
      ctx.info('granted reboot', { node: o.name(node), unavailable, maxUnavailable: this.maxUnavailable });
    }
    return Action.done();
  }

  mapRelated(_resource, _obj, ctx) {
    return ctx
      .list(kinds.NODE)
      .filter(isWaiting)
      .map((n) => objectKey(undefined, o.name(n)))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }
}
