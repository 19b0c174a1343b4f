//! How many reconciles of one controller may run at once, changeable while they run. A plain
//! semaphore cannot shrink below the permits it has handed out (`forget_permits` forgets only
//! idle ones), so a smaller setting under load would leave more workers than configured for
//! good. Here the permits still out when the setting shrinks become a debt: each one is
//! forgotten when returned, until the number of permits matches the setting again. The limit in
//! force (for `controller_runtime_max_concurrent_reconciles`) is the setting plus that debt, and
//! reconciles running never exceed it.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub struct Workers {
    inner: Arc<Inner>,
}

struct Inner {
    permits: Arc<Semaphore>,
    state: Mutex<State>,
}

struct State {
    setting: usize,
    /// Permits out beyond the setting, forgotten as they come back.
    debt: usize,
}

impl State {
    fn limit(&self) -> usize {
        self.setting + self.debt
    }
}

/// One running reconcile's slot, handed back when dropped.
pub struct Slot {
    permit: Option<OwnedSemaphorePermit>,
    inner: Arc<Inner>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut state = self.inner.state.lock();
        let permit = self.permit.take().expect("dropped once");
        if state.debt > 0 {
            state.debt -= 1;
            permit.forget();
        }
    }
}

impl Workers {
    pub fn new(setting: usize) -> Self {
        Workers { inner: Arc::new(Inner { permits: Arc::new(Semaphore::new(setting)), state: Mutex::new(State { setting, debt: 0 }) }) }
    }

    /// Waits for a free slot.
    pub async fn acquire(&self) -> Slot {
        let permit = self.inner.permits.clone().acquire_owned().await.expect("never closed");
        Slot { permit: Some(permit), inner: self.inner.clone() }
    }

    /// Changes the setting; returns the limit in force now (the setting, plus slots over it that
    /// are still running).
    pub fn resize(&self, to: usize) -> usize {
        let mut state = self.inner.state.lock();
        if to >= state.setting {
            let grow = to - state.setting;
            let repaid = grow.min(state.debt);
            state.debt -= repaid;
            self.inner.permits.add_permits(grow - repaid);
        } else {
            let shrink = state.setting - to;
            let forgotten = self.inner.permits.forget_permits(shrink);
            state.debt += shrink - forgotten;
        }
        state.setting = to;
        state.limit()
    }

    /// The limit in force: the setting, plus slots over it that are still running.
    pub fn limit(&self) -> usize {
        self.inner.state.lock().limit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shrinking_under_load_never_leaves_more_slots_than_the_setting() {
        let workers = Workers::new(4);
        let mut running = Vec::new();
        for _ in 0..4 {
            running.push(workers.acquire().await);
        }
        // Down to 1 while all 4 run: the limit in force is what still runs...
        assert_eq!(workers.resize(1), 4);
        drop(running.pop());
        assert_eq!(workers.limit(), 3);
        drop(running.pop());
        assert_eq!(workers.limit(), 2);
        assert!(tokio::time::timeout(std::time::Duration::from_millis(5), workers.acquire()).await.is_err(), "no slot while over the setting");
        drop(running.pop());
        assert_eq!(workers.limit(), 1);
        assert!(tokio::time::timeout(std::time::Duration::from_millis(5), workers.acquire()).await.is_err(), "the one slot is still taken");
        drop(running.pop());
        assert_eq!(workers.limit(), 1);
        // ...and then exactly the setting.
        let one = workers.acquire().await;
        assert!(tokio::time::timeout(std::time::Duration::from_millis(5), workers.acquire()).await.is_err());
        // Up again while a debt is owed: the debt is repaid before permits are added.
        let mut held = vec![one];
        assert_eq!(workers.resize(3), 3);
        held.push(workers.acquire().await);
        held.push(workers.acquire().await);
        assert!(tokio::time::timeout(std::time::Duration::from_millis(5), workers.acquire()).await.is_err());
        assert_eq!(workers.resize(1), 3);
        assert_eq!(workers.resize(2), 3, "half the debt repaid by growing");
        drop(held);
        let a = workers.acquire().await;
        let b = workers.acquire().await;
        assert!(tokio::time::timeout(std::time::Duration::from_millis(5), workers.acquire()).await.is_err(), "2 is 2");
        drop((a, b));
    }
}
