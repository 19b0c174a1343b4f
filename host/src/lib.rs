//! # kubewasm
//!
//! A Kubernetes controller host: it owns what every controller needs — shared informers and
//! caches, keyed rate-limited workqueues, leader election, metrics, events, retries — and runs
//! each controller's reconcile logic as a sandboxed WebAssembly component implementing the WIT
//! package `kubewasm:controller` (in `wit/`).
//!
//! ## Layout
//!
//! An event enters in [`informer`] (one shared watch per resource, a JSON cache), becomes keys
//! in a [`queue`] through the triggers of a [`controller`], reaches the plugin through the
//! [`runtime`] (wasmtime, limits, the sandbox; `runtime::host` implements the WIT imports and
//! adapts the Kubernetes layer to them), and leaves as a write through [`client`] or an Event
//! through [`events`] — made as the plugin's own identity ([`identity`]). An object the plugin
//! keeps faulting on is quarantined by its controller (`controller::quarantine`). Each version
//! keeps a tally of the objects it fails on (`controller::health`); after a hot reload the
//! plugin's slot (`supervisor::slot`) judges the new version by it and swaps the previous one
//! back when it is clearly worse (`supervisor::rollout`). A candidate version (`NAME.next.wasm`) runs in the shadow of
//! the live one (`controller::shadow`): each live reconcile is journaled (`runtime::journal`)
//! and replayed against the candidate, whose writes are dry runs, and the two are compared.
//! A declarative plugin answers which children a parent should have; its reconcile is the
//! host's (`runtime::composite`): it claims the children, asks the plugin, and makes the writes
//! through the same services, so everything above sees it as any other plugin.
//! Member clusters ([`cluster`]: kubeconfig files or Secrets, engaged while the host runs) each
//! get their own informers and identities; a plugin serving or reaching one gets a controller
//! there (`controller::fleet`), and its `fleet` calls (`runtime::host::fleet`) name the cluster.
//!
//! - [`app`]: `kubewasm run`, wired in phases; owns shutdown. [`cli`]: the command line.
//!   [`supervisor`]: one slot per plugin file — starts, hot-swaps and stops its controller;
//!   routes the plugin directory's changes to them. [`budget`]: the plugin memory budget.
//!   [`delivery`]: Plugin resources — pulls their modules and hands them to the supervisor;
//!   [`oci`]: OCI registries (`kubewasm push`/`pull`).
//! - [`plugin`]: plugin files — digest, artifact cache, loading. [`cache_dir`]: the disk cache's
//!   size limit. [`manifest`]: what a plugin declares, validation, the capability check, the
//!   RBAC rules it needs.
//! - [`cluster`]: member clusters — the providers, and each engaged member's connection, caches
//!   and identities.
//! - [`identity`]: who each plugin acts as, and RBAC admission. [`leader`]: Lease-based leader
//!   election, fenced by time. [`shard`]: scale-out across replicas — membership Leases, the
//!   consistent-hash ring, the built-in assigner, handovers.
//! - [`discovery`], [`resource`], [`selector`], [`duration`], [`bucket`]: kinds, keys, label selectors,
//!   durations and the token bucket every pacer shares. [`projection`]: what of an object a
//!   plugin is handed. [`allocator`]: freed memory handed back.
//! - [`metrics`], [`server`]: Prometheus metrics and the HTTP endpoints. [`logging`]: the host's
//!   log and its levels, per plugin for plugins' records. [`case`]: how cases spell calls,
//!   Events and results, and their diffs (table tests, recordings and shadow runs). [`excerpt`]:
//!   text from elsewhere cut to a size for logs and statuses.
//! - [`tools`]: the other subcommands — running plugins without a cluster, `kubewasm test`,
//!   `record`, `rbac`, `webhooks`, `finalizers release`, `new` and `build --lang go|c`.
//!
//! ## Import rule
//!
//! A module names only modules on lines below its own (`imports::tests` checks every module
//! against these lines, which place every module of the crate):
//!
//! 1. cli
//! 2. tools
//! 3. app
//! 4. delivery
//! 5. supervisor
//! 6. controller
//! 7. case, plugin, webhook
//! 8. runtime, shard, cluster
//! 9. identity, events
//! 10. client, queue, server, oci
//! 11. informer, leader
//! 12. discovery, manifest
//! 13. selector, projection, hooks
//! 14. resource, duration, metrics, bucket, budget, allocator, cache_dir, logging, excerpt

pub mod allocator;
pub mod app;
pub mod bucket;
pub mod budget;
pub mod cache_dir;
pub mod case;
pub mod cli;
pub mod client;
pub mod cluster;
pub mod controller;
pub mod delivery;
pub mod discovery;
pub mod duration;
pub mod events;
pub mod excerpt;
#[cfg(test)]
mod fake_api;
pub mod hooks;
pub mod identity;
#[cfg(test)]
mod imports;
pub mod informer;
pub mod leader;
pub mod logging;
pub mod manifest;
pub mod metrics;
pub mod oci;
pub mod plugin;
pub mod projection;
pub mod queue;
pub mod resource;
pub mod runtime;
pub mod selector;
pub mod server;
pub mod shard;
pub mod supervisor;
pub mod tools;
pub mod webhook;
