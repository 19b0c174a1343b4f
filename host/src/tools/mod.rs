//! The subcommands besides `kubewasm run`, each a tool for a plugin's author or operator: running
//! plugins without a cluster ([`offline`]), table tests ([`tabletest`], `kubewasm test`), recording
//! live calls as cases ([`recording`], `kubewasm record`), the RBAC a plugin needs ([`rbac`],
//! `kubewasm rbac`), the webhook configurations plugins' hooks need ([`webhooks`], `kubewasm
//! webhooks`), releasing a removed plugin's finalizers ([`finalizers`]), scaffolding a
//! project ([`scaffold`], `kubewasm new`) and building Go and C plugins ([`build`]). They sit above
//! everything `kubewasm run` uses and below [`crate::cli`] alone; nothing of the host names them.

pub mod build;
pub mod finalizers;
pub mod offline;
pub mod rbac;
pub mod recording;
pub mod scaffold;
pub mod tabletest;
pub mod webhooks;
