//! A notification queue (the paper's inotify example): producers on every CPU log events,
//! a consumer reads them frequently, in the order they were logged.
//!
//! Events are not absorbed: coalescing a new event with the tail of the local log would be
//! wrong whenever another CPU logged an event in between (the global tail differs), so the
//! queue uses the plain [`OpVec`] log and gets its benefit from batching alone.

use crate::log::{Op, OpVec};
use crate::object::{Domain, NoMemory, Object};
use std::collections::VecDeque;
use std::sync::Arc;

/// One notification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The watch it belongs to.
    pub watch: u32,
    /// What happened (a bit mask, like inotify's).
    pub mask: u32,
    /// A cookie or file identifier.
    pub cookie: u64,
}

/// The logged update: append an event to the queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enqueue(pub Event);

impl Op for Enqueue {
    type Target = VecDeque<Event>;
    #[inline]
    fn exec(self, q: &mut VecDeque<Event>) {
        q.push_back(self.0);
    }
}

/// The queue's log.
pub type NotifyLog = OpVec<Enqueue>;

/// An OpLog notification queue.
pub struct NotifyQueue {
    obj: Object<NotifyLog>,
}

/// Shows the queued events, oldest first, synchronized but not taken out of the queue, or
/// `<locked>` where the queue is locked: it never waits for the queue's lock, so a queue can be
/// formatted while its guard is held (by this thread too).
impl core::fmt::Debug for NotifyQueue {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("NotifyQueue")
            .field("events", &crate::object::Synchronized(&self.obj))
            .finish()
    }
}

impl NotifyQueue {
    /// An empty queue logging in `domain`.
    ///
    /// # Aborts
    /// Where the queue's object cannot be allocated, as [`Object::new`] does;
    /// [`NotifyQueue::try_new`] returns an error instead.
    pub fn new(domain: &Arc<Domain<NotifyLog>>) -> Self {
        NotifyQueue {
            obj: Object::new(domain, VecDeque::new()),
        }
    }

    /// [`NotifyQueue::new`], or [`NoMemory`] where the queue's object cannot be allocated (see
    /// [`Object::try_new`]; an empty queue allocates nothing else).
    pub fn try_new(domain: &Arc<Domain<NotifyLog>>) -> Result<Self, NoMemory<VecDeque<Event>>> {
        Ok(NotifyQueue {
            obj: Object::try_new(domain, VecDeque::new())?,
        })
    }

    /// Queues `e` (logged on this CPU).
    #[inline]
    pub fn notify(&self, e: Event) -> crate::Stamp {
        self.obj.log(Enqueue(e)).expect("OpVec stamps every entry")
    }

    /// The oldest event, if any (synchronizes).
    pub fn pop(&self) -> Option<Event> {
        self.obj.synchronize().pop_front()
    }

    /// Every queued event, oldest first (synchronizes).
    pub fn drain(&self) -> Vec<Event> {
        self.obj.synchronize().drain(..).collect()
    }

    /// The underlying object.
    pub fn object(&self) -> &Object<NotifyLog> {
        &self.obj
    }
}
