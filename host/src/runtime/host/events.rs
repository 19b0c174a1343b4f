//! `kubewasm:controller/events`: Kubernetes Events the plugin records about objects it may read.
//! Read in place and checked here (sizes first, then the capability); queued and sent in the
//! background by the plugin's own recorder ([`EventSink`]), under the plugin's own budget.

use wasmtime::component::{ComponentType, Lift, Linker, WasmStr};
use wasmtime::{AsContext, StoreContextMut};

use super::super::bindings::events::{Event, EventType, Host};
use super::super::bindings::types::Error as GuestError;
use super::super::bindings::{PACKAGE, PACKAGE_VERSION};
use super::super::boundary;
use super::args::{LazyRef, Read, owned, settle};
use super::{HostContext, HostState, Services};
use crate::events::{EventRecorder, MAX_NOTE, ObjectEvent};
use crate::manifest::Verb;
use crate::resource::{Gvk, ObjectKey, uid_of};

/// Where checked events go; publishing must not block the caller.
pub trait EventSink: Send + Sync {
    fn publish(&self, event: ObjectEvent);
}

impl EventSink for EventRecorder {
    fn publish(&self, event: ObjectEvent) {
        EventRecorder::publish(self, event)
    }
}

pub struct EventsCtx<'a> {
    host: &'a HostContext,
    services: &'a Services,
}

pub fn context<T: HostState>(state: &mut T) -> EventsCtx<'_> {
    EventsCtx { host: state.host(), services: state.services() }
}

/// `events.event`, in place. An Event over Kubernetes' limits on `reason`, `action`
/// ([`boundary::MAX_REASON`]) and `note` ([`MAX_NOTE`]) is refused, not cut: the plugin should hear that
/// its note did not fit.
#[derive(ComponentType, Lift)]
#[component(record)]
struct LazyEvent {
    regarding: LazyRef,
    #[component(name = "event-type")]
    event_type: EventType,
    reason: WasmStr,
    action: WasmStr,
    note: WasmStr,
}

impl LazyEvent {
    fn read(&self, store: &impl AsContext) -> Read<Event> {
        let reason = |s: &WasmStr, field: &str| -> Read<String> {
            let text = s.to_str(store)?;
            boundary::check_reason(field, text.len())?;
            Ok(text.into_owned())
        };
        Ok(Event {
            regarding: self.regarding.read(store)?,
            event_type: self.event_type,
            reason: reason(&self.reason, "event reason")?,
            action: reason(&self.action, "event action")?,
            note: owned(store, &self.note, "event note", MAX_NOTE)?,
        })
    }
}

/// Registers `events.publish` with its event read in place (`super::args`).
pub fn add_to_linker<T: HostState>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    let mut events = linker.instance(&format!("{PACKAGE}/events@{PACKAGE_VERSION}"))?;
    events.func_wrap("publish", |mut store: StoreContextMut<'_, T>, (event,): (LazyEvent,)| {
        let event = match settle(event.read(&store))? {
            Ok(event) => event,
            Err(refused) => return Ok((Err(refused),)),
        };
        Ok((Host::publish(&mut context(store.data_mut()), event)?,))
    })
}

impl EventsCtx<'_> {
    fn publish(&self, event: Event) -> Result<(), GuestError> {
        let regarding = Gvk::from(event.regarding.resource);
        let namespace = event.regarding.namespace.as_deref();
        self.host.cache_only("an Event")?;
        self.host.check(Verb::Get, &regarding, None, namespace, Some(&event.regarding.name))?;
        let key = ObjectKey::new(namespace, &event.regarding.name);
        let uid = self.services.cache.get(&regarding, &key).and_then(|json| uid_of(&json));
        self.services.events.publish(ObjectEvent {
            regarding,
            key,
            uid,
            warning: matches!(event.event_type, EventType::Warning),
            reason: event.reason,
            action: event.action,
            note: event.note,
        });
        Ok(())
    }
}

impl Host for EventsCtx<'_> {
    fn publish(&mut self, event: Event) -> wasmtime::Result<Result<(), GuestError>> {
        Ok(EventsCtx::publish(self, event))
    }
}
