//! `kubewasm:controller/events`: Kubernetes Events the plugin records about objects it may read.
//! Checked here; queued and sent in the background by the plugin's own recorder ([`EventSink`]),
//! under the plugin's own budget.

use wasmtime::component::HasData;

use super::super::bindings::events::{Event, EventType, Host};
use super::super::bindings::types::{Error as GuestError, ErrorCode};
use super::{HostContext, HostState, Services, error};
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

pub struct EventsData;

impl HasData for EventsData {
    type Data<'a> = EventsCtx<'a>;
}

pub fn context<T: HostState>(state: &mut T) -> EventsCtx<'_> {
    EventsCtx { host: state.host(), services: state.services() }
}

/// Kubernetes' limit on `reason` and `action` (the note's is [`MAX_NOTE`]). A guest's Event
/// beyond them is refused, not cut: the plugin should hear that its note did not fit.
const MAX_REASON: usize = 128;

impl EventsCtx<'_> {
    fn publish(&self, event: Event) -> Result<(), GuestError> {
        let regarding = Gvk::from(event.regarding.resource);
        let namespace = event.regarding.namespace.as_deref();
        self.host.cache_only("an Event")?;
        self.host.check(Verb::Get, &regarding, None, namespace, Some(&event.regarding.name))?;
        for (field, value) in [("reason", &event.reason), ("action", &event.action)] {
            if value.is_empty() || value.len() > MAX_REASON {
                return Err(error(ErrorCode::Invalid, format!("the event {field} must be 1 to {MAX_REASON} characters")));
            }
        }
        if event.note.len() > MAX_NOTE {
            return Err(error(ErrorCode::Invalid, format!("the event note is {} bytes; at most {MAX_NOTE}", event.note.len())));
        }
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
