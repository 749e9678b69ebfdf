//! One priority level's fair queuing, kube's queue set without its IO: a
//! concurrency limit in seats; for a `Queue` level, queues that flows are
//! shuffle-sharded over (a request joins the shortest queue of its flow's
//! hand, or is rejected when that queue is full); and dispatching by
//! virtual time, so that the queue whose head would finish first in a fair
//! share of the seats goes next. Time is passed in, so that the arithmetic
//! is tested without clocks; the waiters are tokens of the caller's choice.

use std::collections::VecDeque;
use std::time::Instant;

use super::Dealer;

/// How long a request is assumed to execute until it has (kube's
/// estimated service duration), in seconds; corrected when it finishes.
const ESTIMATED_SERVICE_SECONDS: f64 = 0.003;

/// A level's queuing parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queuing {
    /// Queues.
    pub queues: u32,
    /// Queues in a flow's hand.
    pub hand_size: u32,
    /// Requests a queue may hold.
    pub queue_length_limit: u32,
}

/// A level's configuration: its limit, and its queuing (`None`: reject past the limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Seats that may execute at once.
    pub concurrency_limit: u32,
    /// How requests past the limit wait, if they do.
    pub queuing: Option<Queuing>,
}

/// Why a request was not executed, as kube's metrics label it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// Its queue was full.
    QueueFull,
    /// The level does not queue, and its seats were taken.
    ConcurrencyLimit,
    /// It waited longer than the wait limit.
    TimeOut,
    /// Its client went away while it waited.
    Cancelled,
}

impl RejectReason {
    /// kube's label.
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::QueueFull => "queue-full",
            RejectReason::ConcurrencyLimit => "concurrency-limit",
            RejectReason::TimeOut => "time-out",
            RejectReason::Cancelled => "cancelled",
        }
    }

    /// Every reason, in a fixed order.
    pub const ALL: [RejectReason; 4] = [
        RejectReason::QueueFull,
        RejectReason::ConcurrencyLimit,
        RejectReason::TimeOut,
        RejectReason::Cancelled,
    ];
}

/// A request executing: the seats it holds, given back by [`QueueSet::finish`].
#[derive(Debug, PartialEq)]
pub struct Ticket {
    queue: Option<usize>,
    seats: u32,
    started: Instant,
}

impl Ticket {
    /// The seats it holds.
    pub fn seats(&self) -> u32 {
        self.seats
    }
}

/// Where a queued request waits: its queue and its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    queue: usize,
    id: u64,
}

/// A request waiting in a queue.
struct Waiting<T> {
    id: u64,
    seats: u32,
    token: T,
}

/// One queue: who waits, what of it executes, and its virtual time.
struct Queue<T> {
    waiting: VecDeque<Waiting<T>>,
    waiting_seats: u32,
    executing: u32,
    seats_in_use: u32,
    /// The virtual time (seat-seconds) at which its next request starts.
    next_dispatch: f64,
}

impl<T> Queue<T> {
    fn new() -> Queue<T> {
        Queue {
            waiting: VecDeque::new(),
            waiting_seats: 0,
            executing: 0,
            seats_in_use: 0,
            next_dispatch: 0.0,
        }
    }

    fn active(&self) -> bool {
        !self.waiting.is_empty() || self.executing > 0
    }
}

/// Counts kept for `/debug/api_priority_and_fairness/dump_priority_levels`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests dispatched.
    pub dispatched: u64,
    /// Requests rejected (queue full or no seats).
    pub rejected: u64,
    /// Requests that waited too long.
    pub timed_out: u64,
    /// Requests whose client went away while they waited.
    pub cancelled: u64,
}

/// One level's queues and seats.
pub struct QueueSet<T> {
    config: Config,
    dealer: Option<Dealer>,
    queues: Vec<Queue<T>>,
    seats_in_use: u32,
    executing: u32,
    waiting: u32,
    /// Seats the waiting requests ask for.
    waiting_seats: u64,
    /// Queues with requests waiting or executing.
    active: u32,
    /// The virtual time, in seat-seconds each active queue was due.
    virtual_time: f64,
    synced: Option<Instant>,
    next_id: u64,
    stats: Stats,
}

impl<T> QueueSet<T> {
    /// An idle queue set.
    pub fn new(config: Config) -> QueueSet<T> {
        let mut set = QueueSet {
            config,
            dealer: None,
            queues: Vec::new(),
            seats_in_use: 0,
            executing: 0,
            waiting: 0,
            waiting_seats: 0,
            active: 0,
            virtual_time: 0.0,
            synced: None,
            next_id: 0,
            stats: Stats::default(),
        };
        set.apply(config);
        set
    }

    /// The configuration.
    pub fn config(&self) -> Config {
        self.config
    }

    /// Takes a new configuration; requests waiting in queues that no longer
    /// exist move to the remaining ones. Returns what may now execute.
    pub fn configure(&mut self, config: Config, now: Instant) -> Vec<(T, Ticket)> {
        if config != self.config {
            self.sync(now);
            self.apply(config);
        }
        self.dispatch(now)
    }

    fn apply(&mut self, config: Config) {
        self.config = config;
        let wanted = config.queuing.map_or(0, |q| q.queues.max(1)) as usize;
        self.dealer = config.queuing.and_then(|q| {
            let deck = u32::try_from(wanted).unwrap_or(u32::MAX);
            Dealer::new(deck, q.hand_size.clamp(1, deck))
        });
        // A level that stops queuing keeps one queue for those still waiting.
        let keep = if wanted == 0 && self.waiting > 0 {
            1
        } else {
            wanted
        };
        if keep >= self.queues.len() {
            self.queues.resize_with(keep, Queue::new);
            self.recount();
            return;
        }
        // Executing requests of removed queues finish against the totals;
        // their waiters move to the queues kept.
        let removed: Vec<Queue<T>> = self.queues.drain(keep..).collect();
        for (i, queue) in removed.into_iter().enumerate() {
            for waiting in queue.waiting {
                if let Some(target) = self.queues.get_mut(i % keep.max(1)) {
                    target.waiting_seats += waiting.seats;
                    target.waiting.push_back(waiting);
                }
            }
        }
        self.recount();
    }

    /// Counts the active queues again (after a configuration change).
    fn recount(&mut self) {
        self.active = self.queues.iter().filter(|q| q.active()).count() as u32;
    }

    /// Whether `seats` more fit: within the limit, or nothing executes (a
    /// request wider than the limit runs alone, as kube lets it).
    fn fits(&self, seats: u32) -> bool {
        self.seats_in_use == 0 || self.seats_in_use + seats <= self.config.concurrency_limit
    }

    /// Advances the virtual time: each active queue is due its share of
    /// the seats in use or asked for, up to the limit.
    fn sync(&mut self, now: Instant) {
        let elapsed = self
            .synced
            .map_or(0.0, |s| now.saturating_duration_since(s).as_secs_f64());
        self.synced = Some(now);
        if elapsed == 0.0 || self.active == 0 {
            return;
        }
        let asked = self.waiting_seats + u64::from(self.seats_in_use);
        let busy = asked.min(u64::from(self.config.concurrency_limit.max(1))) as f64;
        self.virtual_time += elapsed * busy / f64::from(self.active);
    }

    /// The queue of the flow `hash`'s hand with the fewest seats waiting and executing.
    fn choose_queue(&self, hash: u64) -> usize {
        let Some(dealer) = self.dealer else {
            return 0;
        };
        let mut best = (u32::MAX, 0);
        dealer.deal(hash, |card| {
            if let Some(queue) = self.queues.get(card) {
                let load = queue.waiting_seats + queue.seats_in_use;
                if load < best.0 {
                    best = (load, card);
                }
            }
        });
        best.1
    }

    /// Executes a request at once if nothing waits and its seats fit (the
    /// uncongested case: no queue, no waiting).
    pub fn start_now(&mut self, seats: u32, hash: u64, now: Instant) -> Option<Ticket> {
        if self.waiting > 0 || !self.fits(seats) {
            return None;
        }
        self.sync(now);
        let queue = if self.queues.is_empty() {
            None
        } else {
            let index = self.choose_queue(hash);
            let queue = &mut self.queues[index];
            if !queue.active() {
                queue.next_dispatch = self.virtual_time;
                self.active += 1;
            }
            queue.next_dispatch += f64::from(seats) * ESTIMATED_SERVICE_SECONDS;
            Some(index)
        };
        Some(self.executes(queue, seats, now))
    }

    fn executes(&mut self, queue: Option<usize>, seats: u32, now: Instant) -> Ticket {
        if let Some(q) = queue.and_then(|i| self.queues.get_mut(i)) {
            q.executing += 1;
            q.seats_in_use += seats;
        }
        self.executing += 1;
        self.seats_in_use += seats;
        self.stats.dispatched += 1;
        Ticket {
            queue,
            seats,
            started: now,
        }
    }

    /// Queues a request that could not start at once; it is rejected when
    /// the level does not queue or its queue is full. Returns where it
    /// waits and what may execute now (perhaps itself).
    #[allow(clippy::type_complexity)] // a place and the dispatched
    pub fn enqueue(
        &mut self,
        seats: u32,
        hash: u64,
        token: T,
        now: Instant,
    ) -> Result<(Place, Vec<(T, Ticket)>), RejectReason> {
        let Some(queuing) = self.config.queuing else {
            self.stats.rejected += 1;
            return Err(RejectReason::ConcurrencyLimit);
        };
        self.sync(now);
        let index = self.choose_queue(hash);
        let queue = &mut self.queues[index];
        if queue.waiting.len() >= queuing.queue_length_limit as usize {
            self.stats.rejected += 1;
            return Err(RejectReason::QueueFull);
        }
        if !queue.active() {
            queue.next_dispatch = self.virtual_time;
            self.active += 1;
        }
        let id = self.next_id;
        self.next_id += 1;
        queue.waiting_seats += seats;
        queue.waiting.push_back(Waiting { id, seats, token });
        self.waiting += 1;
        self.waiting_seats += u64::from(seats);
        Ok((Place { queue: index, id }, self.dispatch(now)))
    }

    /// Dispatches waiting requests while their seats fit: each time the
    /// head of the queue that would finish first in virtual time.
    pub fn dispatch(&mut self, now: Instant) -> Vec<(T, Ticket)> {
        let mut started = Vec::new();
        if self.waiting == 0 {
            return started;
        }
        self.sync(now);
        loop {
            let next = self
                .queues
                .iter()
                .enumerate()
                .filter_map(|(i, q)| {
                    let head = q.waiting.front()?;
                    let finish =
                        q.next_dispatch + f64::from(head.seats) * ESTIMATED_SERVICE_SECONDS;
                    Some((finish, i, head.seats))
                })
                .min_by(|a, b| a.0.total_cmp(&b.0));
            let Some((_, index, seats)) = next else {
                break;
            };
            if !self.fits(seats) {
                break;
            }
            let queue = &mut self.queues[index];
            let Some(waiting) = queue.waiting.pop_front() else {
                break;
            };
            queue.waiting_seats -= waiting.seats;
            queue.next_dispatch += f64::from(seats) * ESTIMATED_SERVICE_SECONDS;
            self.waiting -= 1;
            self.waiting_seats -= u64::from(waiting.seats);
            let ticket = self.executes(Some(index), seats, now);
            started.push((waiting.token, ticket));
        }
        started
    }

    /// A request is done (or, for a watch, initialized): its seats are given
    /// back, its queue's virtual time corrected by what it really took, and
    /// what may execute now is returned.
    pub fn finish(&mut self, ticket: Ticket, now: Instant) -> Vec<(T, Ticket)> {
        self.sync(now);
        self.executing = self.executing.saturating_sub(1);
        self.seats_in_use = self.seats_in_use.saturating_sub(ticket.seats);
        if let Some(queue) = ticket.queue.and_then(|i| self.queues.get_mut(i)) {
            let was = queue.active();
            queue.executing = queue.executing.saturating_sub(1);
            queue.seats_in_use = queue.seats_in_use.saturating_sub(ticket.seats);
            let took = now.saturating_duration_since(ticket.started).as_secs_f64();
            queue.next_dispatch -= f64::from(ticket.seats) * (ESTIMATED_SERVICE_SECONDS - took);
            if was && !queue.active() {
                self.active -= 1;
            }
        }
        self.dispatch(now)
    }

    /// Takes a waiting request out (it timed out, or its client left);
    /// `None` if it was dispatched already.
    pub fn remove(&mut self, place: Place, reason: RejectReason) -> Option<T> {
        let position = |q: &Queue<T>| q.waiting.iter().position(|w| w.id == place.id);
        // Where it was queued, or (moved by a configuration change) anywhere.
        let (index, at) = self
            .queues
            .get(place.queue)
            .and_then(position)
            .map(|p| (place.queue, p))
            .or_else(|| {
                self.queues
                    .iter()
                    .enumerate()
                    .find_map(|(i, q)| position(q).map(|p| (i, p)))
            })?;
        let queue = &mut self.queues[index];
        let waiting = queue.waiting.remove(at)?;
        queue.waiting_seats -= waiting.seats;
        if !queue.active() {
            self.active -= 1;
        }
        self.waiting_seats -= u64::from(waiting.seats);
        self.waiting -= 1;
        match reason {
            RejectReason::Cancelled => self.stats.cancelled += 1,
            RejectReason::TimeOut => self.stats.timed_out += 1,
            _ => self.stats.rejected += 1,
        }
        Some(waiting.token)
    }

    /// Requests waiting.
    pub fn waiting(&self) -> u32 {
        self.waiting
    }

    /// Requests executing.
    pub fn executing(&self) -> u32 {
        self.executing
    }

    /// Seats taken.
    pub fn seats_in_use(&self) -> u32 {
        self.seats_in_use
    }

    /// Queues holding waiting or executing requests (kept as they change).
    pub fn active(&self) -> u32 {
        self.active
    }

    /// Queues holding waiting requests.
    pub fn active_queues(&self) -> usize {
        self.queues.iter().filter(|q| !q.waiting.is_empty()).count()
    }

    /// The counts so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn queuing(limit: u32, queues: u32, hand: u32, length: u32) -> Config {
        Config {
            concurrency_limit: limit,
            queuing: Some(Queuing {
                queues,
                hand_size: hand,
                queue_length_limit: length,
            }),
        }
    }

    #[test]
    fn requests_start_within_the_limit_then_queue_then_are_rejected() {
        let t0 = Instant::now();
        let mut set = QueueSet::new(queuing(2, 1, 1, 1));
        let a = set.start_now(1, 7, t0).expect("a seat");
        let b = set.start_now(1, 7, t0).expect("a seat");
        assert!(set.start_now(1, 7, t0).is_none());
        let (place, started) = set.enqueue(1, 7, "c", t0).expect("queued");
        assert!(started.is_empty());
        assert!(matches!(
            set.enqueue(1, 7, "d", t0),
            Err(RejectReason::QueueFull)
        ));
        assert_eq!(
            (set.waiting(), set.executing(), set.seats_in_use()),
            (1, 2, 2)
        );
        // A finished request lets the waiting one in.
        let started = set.finish(a, t0 + Duration::from_millis(5));
        assert_eq!(started.len(), 1);
        assert_eq!(started[0].0, "c");
        assert!(set.remove(place, RejectReason::TimeOut).is_none());
        assert_eq!(set.active(), 1);
        let _ = set.finish(b, t0 + Duration::from_millis(6));
        let _ = set.finish(started.into_iter().next().expect("started").1, t0);
        assert_eq!(
            (set.waiting(), set.executing(), set.seats_in_use()),
            (0, 0, 0)
        );
        assert_eq!(
            set.stats(),
            Stats {
                dispatched: 3,
                rejected: 1,
                ..Stats::default()
            }
        );
    }

    #[test]
    fn a_reject_level_never_queues_and_a_wide_request_runs_alone() {
        let t0 = Instant::now();
        let mut set: QueueSet<()> = QueueSet::new(Config {
            concurrency_limit: 3,
            queuing: None,
        });
        let wide = set.start_now(10, 0, t0).expect("alone, it runs");
        assert!(set.start_now(1, 0, t0).is_none());
        assert!(matches!(
            set.enqueue(1, 0, (), t0),
            Err(RejectReason::ConcurrencyLimit)
        ));
        let _ = set.finish(wide, t0);
        assert!(set.start_now(3, 0, t0).is_some());
    }

    #[test]
    fn a_timed_out_waiter_is_taken_out_and_counted() {
        let t0 = Instant::now();
        let mut set = QueueSet::new(queuing(1, 4, 2, 10));
        let _running = set.start_now(1, 1, t0).expect("a seat");
        let (place, _) = set.enqueue(1, 2, 'x', t0).expect("queued");
        assert_eq!(set.remove(place, RejectReason::TimeOut), Some('x'));
        assert_eq!(set.waiting(), 0);
        assert_eq!(set.active(), 1, "only the running request's queue");
        assert_eq!(set.stats().timed_out, 1);
    }

    #[test]
    fn queues_are_served_fairly_whatever_their_lengths() {
        // Two flows in two queues (hand of one each): the heavy flow queued
        // ten requests before the light one queued two; the light one's
        // are dispatched among the first, not after the heavy ten.
        let t0 = Instant::now();
        let mut set = QueueSet::new(queuing(1, 2, 1, 100));
        let (heavy, light) = (0u64, 1u64);
        let busy = set.start_now(1, heavy, t0).expect("a seat");
        for i in 0..10 {
            set.enqueue(1, heavy, format!("heavy-{i}"), t0)
                .expect("queued");
        }
        for i in 0..2 {
            set.enqueue(1, light, format!("light-{i}"), t0)
                .expect("queued");
        }
        let mut order = Vec::new();
        let mut ticket = busy;
        let mut now = t0;
        for _ in 0..12 {
            now += Duration::from_millis(3);
            let mut next = set.finish(ticket, now);
            assert_eq!(next.len(), 1);
            let (name, t) = next.remove(0);
            order.push(name);
            ticket = t;
        }
        let light_positions: Vec<usize> = order
            .iter()
            .enumerate()
            .filter(|(_, n)| n.starts_with("light"))
            .map(|(i, _)| i)
            .collect();
        assert!(light_positions.iter().all(|p| *p < 5), "{order:?}");
    }

    #[test]
    fn a_smaller_configuration_keeps_its_waiters() {
        let t0 = Instant::now();
        let mut set = QueueSet::new(queuing(1, 8, 2, 10));
        let running = set.start_now(1, 0, t0).expect("a seat");
        for hash in 0..6u64 {
            set.enqueue(1, hash * 977, hash, t0).expect("queued");
        }
        assert!(set.configure(queuing(1, 2, 1, 10), t0).is_empty());
        assert_eq!(set.waiting(), 6);
        let started = set.finish(running, t0);
        assert_eq!(started.len(), 1);
        // A larger limit lets more in at once.
        assert_eq!(set.configure(queuing(4, 2, 1, 10), t0).len(), 3);
    }
}
