// Generated from the kubewasm WIT by scripts/gen-wit-types.js (jco guest types). Do not edit.
/// <reference path="./interfaces/kubewasm-controller-access.d.ts" />
/// <reference path="./interfaces/kubewasm-controller-cache.d.ts" />
/// <reference path="./interfaces/kubewasm-controller-client.d.ts" />
/// <reference path="./interfaces/kubewasm-controller-clusters.d.ts" />
/// <reference path="./interfaces/kubewasm-controller-composite.d.ts" />
/// <reference path="./interfaces/kubewasm-controller-events.d.ts" />
/// <reference path="./interfaces/kubewasm-controller-fleet.d.ts" />
/// <reference path="./interfaces/kubewasm-controller-log.d.ts" />
/// <reference path="./interfaces/kubewasm-controller-plugin.d.ts" />
/// <reference path="./interfaces/kubewasm-controller-projections.d.ts" />
/// <reference path="./interfaces/kubewasm-controller-reconciler.d.ts" />
/// <reference path="./interfaces/kubewasm-controller-release.d.ts" />
/// <reference path="./interfaces/kubewasm-controller-types.d.ts" />
/// <reference path="./interfaces/kubewasm-controller-views.d.ts" />
/// <reference path="./interfaces/kubewasm-controller-webhooks.d.ts" />
declare module 'kubewasm:controller/controller@0.1.6' {
  export type * as KubewasmControllerCache016 from 'kubewasm:controller/cache@0.1.6'; // import kubewasm:controller/cache@0.1.6
  export type * as KubewasmControllerClient016 from 'kubewasm:controller/client@0.1.6'; // import kubewasm:controller/client@0.1.6
  export type * as KubewasmControllerEvents016 from 'kubewasm:controller/events@0.1.6'; // import kubewasm:controller/events@0.1.6
  export type * as KubewasmControllerFleet016 from 'kubewasm:controller/fleet@0.1.6'; // import kubewasm:controller/fleet@0.1.6
  export type * as KubewasmControllerLog016 from 'kubewasm:controller/log@0.1.6'; // import kubewasm:controller/log@0.1.6
  export type * as KubewasmControllerTypes016 from 'kubewasm:controller/types@0.1.6'; // import kubewasm:controller/types@0.1.6
  export * as plugin from 'kubewasm:controller/plugin@0.1.6'; // export kubewasm:controller/plugin@0.1.6
  export * as reconciler from 'kubewasm:controller/reconciler@0.1.6'; // export kubewasm:controller/reconciler@0.1.6
  export * as access from 'kubewasm:controller/access@0.1.6'; // export kubewasm:controller/access@0.1.6
  export * as release from 'kubewasm:controller/release@0.1.6'; // export kubewasm:controller/release@0.1.6
  export * as views from 'kubewasm:controller/views@0.1.6'; // export kubewasm:controller/views@0.1.6
  export * as composite from 'kubewasm:controller/composite@0.1.6'; // export kubewasm:controller/composite@0.1.6
  export * as clusters from 'kubewasm:controller/clusters@0.1.6'; // export kubewasm:controller/clusters@0.1.6
  export * as projections from 'kubewasm:controller/projections@0.1.6'; // export kubewasm:controller/projections@0.1.6
  export * as webhooks from 'kubewasm:controller/webhooks@0.1.6'; // export kubewasm:controller/webhooks@0.1.6
}
