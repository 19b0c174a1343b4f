//! The host-wide budget of plugin linear memory (`--plugin-memory-budget`). Every instance that
//! exists holds its memory limit in it: a plugin version reserves its first instance's before it
//! is admitted (so it can always run one call), a member controller of a plugin reserves its own
//! first instance the same way, and each further instance reserves its own when the runtime makes
//! it and gives it back when it goes (see `runtime`). So the memory limits of all instances
//! together never exceed what the host was given for them, while a plugin that is idle, or busy
//! on one key at a time, costs one instance's worth whatever its max-concurrency — fifty small
//! plugins fit the default budget.
//!
//! Each plugin has an [`Account`] in the budget: what all its versions, candidates and member
//! controllers hold. Instances past a first one may bring a plugin's account to at most its share
//! of the budget (`--plugin-max-budget-share`), so one busy or sleeping plugin cannot take all
//! the room and leave none for other plugins to load or grow; a first instance needs only room in
//! the budget. A [`Reservation`] is a guard: dropping it gives the bytes back, so nothing is booked
//! or released by hand (a swap that fails drops the new version's guard and keeps the old one's).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use prometheus_client::metrics::gauge::Gauge;

/// The budget; clones share it.
#[derive(Clone)]
pub struct MemoryBudget {
    inner: Arc<Inner>,
}

struct Inner {
    total: u64,
    /// The most one plugin's account may reach by reserving instances past a first one.
    plugin_cap: u64,
    held: Mutex<Held>,
    /// The bytes reserved by all plugins together (`kubewasm_plugin_memory_budget_bytes{state="reserved"}`).
    gauge: Gauge,
}

#[derive(Default)]
struct Held {
    reserved: u64,
    /// Per plugin: what its reservations hold (no entry once nothing).
    accounts: HashMap<Arc<str>, u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "needs {needed} bytes of plugin memory (its memory limit, for one instance), but only {available} of the host's \
     {total} (--plugin-memory-budget) are free: lower its memory limit (`[kubewasm] memory-mib` in NAME.toml), or \
     raise the budget"
)]
pub struct BudgetError {
    pub needed: u64,
    pub available: u64,
    pub total: u64,
}

/// The most of the budget one plugin's account may reach with instances past a first one: a
/// fraction above 0 and at most 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Share(f64);

impl Share {
    /// A quarter: four busy plugins may fill the budget, and a fifth still finds room to load
    /// once one of them gives some back.
    pub const DEFAULT: Share = Share(0.25);
    pub const WHOLE: Share = Share(1.0);

    pub fn new(share: f64) -> Result<Self, ShareError> {
        // Written so that NaN is refused too.
        if share > 0.0 && share <= 1.0 { Ok(Share(share)) } else { Err(ShareError::Range(share)) }
    }

    /// The share of `total` bytes, rounded down (exact for the whole).
    fn of(self, total: u64) -> u64 {
        if self.0 >= 1.0 { total } else { (total as f64 * self.0) as u64 }
    }
}

impl std::str::FromStr for Share {
    type Err = ShareError;

    fn from_str(text: &str) -> Result<Self, ShareError> {
        Share::new(text.trim().parse().map_err(|_| ShareError::Parse(text.to_string()))?)
    }
}

/// A share of the budget (`--plugin-max-budget-share`) that is not a fraction of it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ShareError {
    #[error("{0:?} is not a number such as 0.25")]
    Parse(String),
    #[error("{0} is not a share of the budget above 0 and at most 1 (such as 0.25)")]
    Range(f64),
}

/// Bytes of the budget held for one instance; given back when dropped.
#[must_use = "the bytes are given back as soon as the reservation is dropped"]
pub struct Reservation {
    budget: Arc<Inner>,
    /// The plugin whose account holds it; `None`: a `describe` before the plugin's name is known.
    plugin: Option<Arc<str>>,
    bytes: u64,
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Reservation({} bytes)", self.bytes)
    }
}

/// One plugin's account in the budget; clones share it.
#[derive(Clone)]
pub struct Account {
    budget: Arc<Inner>,
    plugin: Arc<str>,
}

impl MemoryBudget {
    /// A budget of `total` bytes whose reservations `gauge` follows, where one plugin may reach
    /// `plugin_share` of it with instances past a first one.
    pub fn new(total: u64, plugin_share: Share, gauge: Gauge) -> Self {
        MemoryBudget { inner: Arc::new(Inner { total, plugin_cap: plugin_share.of(total), held: Mutex::default(), gauge }) }
    }

    /// Reserves `bytes` for a `describe`, before the plugin's name is known: in no plugin's
    /// account, on top of what is held already (a new version describes itself while the old one
    /// still serves).
    pub fn reserve(&self, bytes: u64) -> Result<Reservation, BudgetError> {
        self.inner.reserve(None, bytes, u64::MAX).map_err(Refused::into_budget)
    }

    /// The account of `plugin`.
    pub fn account(&self, plugin: &str) -> Account {
        Account { budget: self.inner.clone(), plugin: plugin.into() }
    }

    pub fn total(&self) -> u64 {
        self.inner.total
    }

    /// Bytes reserved now.
    pub fn reserved(&self) -> u64 {
        self.inner.held.lock().reserved
    }
}

impl Account {
    /// Reserves a first instance's `bytes` (a version's when it is admitted, a member
    /// controller's when it starts): it needs only room in the budget, so a plugin whose limit
    /// fits the budget can always load, whatever its share.
    pub fn reserve_first(&self, bytes: u64) -> Result<Reservation, BudgetError> {
        self.budget.reserve(Some(&self.plugin), bytes, u64::MAX).map_err(Refused::into_budget)
    }

    /// Reserves `bytes` for an instance past a first one, if both the budget and the plugin's
    /// share of it have room; `None`: they do not, so the call waits for an instance instead.
    pub fn reserve_more(&self, bytes: u64) -> Option<Reservation> {
        self.budget.reserve(Some(&self.plugin), bytes, self.budget.plugin_cap).ok()
    }

    /// Bytes the plugin holds now.
    pub fn held(&self) -> u64 {
        self.budget.held.lock().accounts.get(&self.plugin).copied().unwrap_or(0)
    }
}

/// Why a reservation was refused.
enum Refused {
    Budget(BudgetError),
    /// The plugin's account would pass its cap.
    Share,
}

impl Refused {
    /// The refusal of an uncapped reservation, which only the budget can refuse.
    fn into_budget(self) -> BudgetError {
        match self {
            Refused::Budget(e) => e,
            Refused::Share => unreachable!("an uncapped reservation passes no cap"),
        }
    }
}

impl Inner {
    /// Books `bytes` for `plugin`, whose account may reach `cap` at most.
    fn reserve(self: &Arc<Self>, plugin: Option<&Arc<str>>, bytes: u64, cap: u64) -> Result<Reservation, Refused> {
        let mut held = self.held.lock();
        let available = self.total.saturating_sub(held.reserved);
        if bytes > available {
            return Err(Refused::Budget(BudgetError { needed: bytes, available, total: self.total }));
        }
        if let Some(plugin) = plugin {
            let account = held.accounts.get(plugin).copied().unwrap_or(0);
            if account.saturating_add(bytes) > cap {
                return Err(Refused::Share);
            }
            held.accounts.insert(plugin.clone(), account + bytes);
        }
        held.reserved += bytes;
        self.gauge.set(i64::try_from(held.reserved).unwrap_or(i64::MAX));
        Ok(Reservation { budget: self.clone(), plugin: plugin.cloned(), bytes })
    }
}

impl Reservation {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut held = self.budget.held.lock();
        held.reserved -= self.bytes;
        if let Some(plugin) = &self.plugin
            && let Some(account) = held.accounts.get_mut(plugin)
        {
            *account -= self.bytes;
            if *account == 0 {
                held.accounts.remove(plugin);
            }
        }
        self.budget.gauge.set(i64::try_from(held.reserved).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_add_up_and_give_back_when_dropped() {
        let gauge = Gauge::default();
        let budget = MemoryBudget::new(1000, Share::WHOLE, gauge.clone());
        let a = budget.reserve(400).unwrap();
        assert_eq!((a.bytes(), gauge.get()), (400, 400));
        let refused = budget.reserve(700).unwrap_err();
        assert_eq!((refused.needed, refused.available), (700, 600));
        assert!(refused.to_string().contains("--plugin-memory-budget"), "{refused}");
        let b = budget.reserve(600).unwrap();
        assert_eq!(gauge.get(), 1000);
        assert!(budget.reserve(1).is_err(), "full");
        drop(b);
        assert_eq!((budget.reserved(), gauge.get()), (400, 400));
        let a2 = budget.reserve(350).unwrap();
        drop(a);
        assert_eq!(budget.reserved(), a2.bytes());
        drop(a2);
        assert_eq!((budget.reserved(), gauge.get()), (0, 0));
    }

    #[test]
    fn a_huge_ask_is_refused_not_wrapped() {
        let budget = MemoryBudget::new(1 << 30, Share::DEFAULT, Gauge::default());
        let _held = budget.reserve(1).unwrap();
        let refused = budget.reserve(u64::MAX).unwrap_err();
        assert_eq!(refused.needed, u64::MAX);
        assert!(budget.account("a").reserve_more(u64::MAX).is_none());
        assert_eq!(budget.reserved(), 1);
    }

    #[test]
    fn each_plugin_has_an_account_of_what_its_reservations_hold() {
        let budget = MemoryBudget::new(1000, Share::WHOLE, Gauge::default());
        let (a, b) = (budget.account("a"), budget.account("b"));
        let first = a.reserve_first(100).unwrap();
        let member = budget.account("a").reserve_first(100).unwrap();
        let more = a.reserve_more(100).unwrap();
        let other = b.reserve_first(50).unwrap();
        let describing = budget.reserve(10).unwrap();
        assert_eq!((a.held(), b.held(), budget.reserved()), (300, 50, 360), "a describe is in no plugin's account");
        drop((first, more, describing));
        assert_eq!((a.held(), b.held(), budget.reserved()), (100, 50, 150));
        drop((member, other));
        assert_eq!((a.held(), b.held(), budget.reserved()), (0, 0, 0));
        assert!(budget.inner.held.lock().accounts.is_empty(), "an account holding nothing is forgotten");
    }

    /// H3: one plugin's instances past a first one stop at its share, and other plugins keep
    /// the rest of the budget to load and grow in.
    #[test]
    fn instances_past_the_first_stop_at_the_plugins_share() {
        let budget = MemoryBudget::new(1000, Share::DEFAULT, Gauge::default());
        let busy = budget.account("busy");
        let mut held = vec![busy.reserve_first(100).unwrap()];
        while let Some(more) = busy.reserve_more(100) {
            held.push(more);
        }
        assert_eq!((busy.held(), budget.reserved()), (200, 200), "a quarter of 1000, in instances of 100");
        let neighbour = budget.account("neighbour");
        let loaded = neighbour.reserve_first(100).unwrap();
        let grown = neighbour.reserve_more(100).unwrap();
        assert_eq!(neighbour.held(), 200, "the neighbour has its own share");
        drop(held.pop());
        assert!(busy.reserve_more(100).is_some(), "room in its share again");
        drop((loaded, grown));
    }

    #[test]
    fn a_first_instance_fits_wherever_the_budget_has_room_whatever_the_share() {
        let budget = MemoryBudget::new(1000, Share::new(0.1).unwrap(), Gauge::default());
        let big = budget.account("big");
        let first = big.reserve_first(600).unwrap();
        assert!(big.reserve_more(1).is_none(), "over its share: no instance past the first");
        let candidate = big.reserve_first(300).unwrap();
        assert_eq!(big.held(), 900, "a candidate's first instance, too");
        let refused = big.reserve_first(200).unwrap_err();
        assert_eq!((refused.needed, refused.available), (200, 100), "but never past the budget");
        drop((first, candidate));
    }

    #[test]
    fn instances_past_the_first_never_pass_the_budget_either() {
        let budget = MemoryBudget::new(1000, Share::WHOLE, Gauge::default());
        let _first = budget.account("a").reserve_first(900).unwrap();
        assert!(budget.account("b").reserve_more(200).is_none());
        assert_eq!(budget.reserved(), 900);
    }

    #[test]
    fn a_share_must_be_a_fraction_of_the_budget() {
        for share in ["0", "-0.5", "1.5", "NaN", "a quarter"] {
            let refused = share.parse::<Share>().unwrap_err();
            assert!(refused.to_string().contains("such as 0.25"), "{refused}");
        }
        assert_eq!("0.25".parse::<Share>().unwrap(), Share::DEFAULT);
        assert_eq!((Share::WHOLE.of(1000), Share::DEFAULT.of(1000), Share::DEFAULT.of(u64::MAX) > 0), (1000, 250, true));
    }
}
