//! Responses clients have not read yet: what each user may leave waiting,
//! and how a large body waits.
//!
//! kube bounds a slow reader by its priority level's seats, held until the
//! response is written; here a ServiceAccount's level (workload-low) has
//! seats for hundreds of large LISTs, so bytes are bounded too. The bytes
//! of a response are charged to its user while the front door gathers them
//! from the server behind ([`charge`], within a [`ledger`]) or when a body
//! is made at the front door itself, and given back once the client has
//! taken the last of them; past [`MAX_UNREAD_BYTES_PER_USER`] (or
//! [`MAX_UNREAD_BYTES`] for everyone) the response is a 429 instead, before
//! more of it is gathered.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Instant;

use bytes::Bytes;

use crate::request::BodyStream;

/// Whole bodies larger than this are handed to the writer a slice at a
/// time, and hold their seats and their bytes' charge until the writer has
/// taken the last slice (the size the writer passes on without copying).
pub const HELD_SLICE: usize = crate::request::COALESCE_BYTES;
/// Most bytes of responses one user may have gathered and not yet read.
pub const MAX_UNREAD_BYTES_PER_USER: usize = 128 << 20;
/// Most bytes of responses gathered and not yet read, all users together.
pub const MAX_UNREAD_BYTES: usize = 512 << 20;

/// What each user holds of a limited resource (open long-running requests,
/// bytes of responses not yet read), within a limit per user and one for
/// everyone.
pub struct PerUser {
    per_user: usize,
    total: usize,
    held: Mutex<(usize, HashMap<String, usize>)>,
}

impl PerUser {
    /// A resource of which each user may hold `per_user`, all `total`.
    pub fn new(per_user: usize, total: usize) -> Arc<PerUser> {
        Arc::new(PerUser {
            per_user,
            total,
            held: Mutex::default(),
        })
    }

    /// `amount` more for `user`, if within both limits.
    pub fn acquire(self: &Arc<Self>, user: &str, amount: usize) -> Option<Share> {
        let mut share = Share {
            owner: self.clone(),
            user: user.to_string(),
            amount: 0,
        };
        share.grow(amount).then_some(share)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, HashMap<String, usize>)> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One user's share of a [`PerUser`] resource; given back when dropped.
pub struct Share {
    owner: Arc<PerUser>,
    user: String,
    amount: usize,
}

impl Share {
    /// Takes `amount` more, if within both limits.
    pub fn grow(&mut self, amount: usize) -> bool {
        let owner = self.owner.clone();
        let mut held = owner.lock();
        let (total, users) = &mut *held;
        let mine = users.get(&self.user).copied().unwrap_or(0);
        if mine + amount > owner.per_user || *total + amount > owner.total {
            return false;
        }
        *total += amount;
        users.insert(self.user.clone(), mine + amount);
        self.amount += amount;
        true
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = self.owner.lock();
        let (total, users) = &mut *held;
        *total -= self.amount;
        if let Some(mine) = users.get_mut(&self.user) {
            *mine -= self.amount;
            if *mine == 0 {
                users.remove(&self.user);
            }
        }
    }
}

/// The process's budget of unread response bytes.
fn unread() -> &'static Arc<PerUser> {
    static UNREAD: LazyLock<Arc<PerUser>> =
        LazyLock::new(|| PerUser::new(MAX_UNREAD_BYTES_PER_USER, MAX_UNREAD_BYTES));
    &UNREAD
}

/// Whether `user` has half of what they may leave unread waiting already:
/// such a user's next requests are refused before they cost anything.
pub fn stalled(user: &str) -> bool {
    let held = unread().lock();
    held.1
        .get(user)
        .is_some_and(|mine| *mine >= MAX_UNREAD_BYTES_PER_USER / 2)
}

/// The charge of the response a request is gathering.
struct Ledger {
    user: String,
    share: Mutex<Option<Share>>,
}

tokio::task_local! {
    static LEDGER: Arc<Ledger>;
}

/// Runs `serving` for `user`, and returns what it charged with its output.
pub async fn ledger<F: Future>(user: &str, serving: F) -> (F::Output, Option<Share>) {
    let ledger = Arc::new(Ledger {
        user: user.to_string(),
        share: Mutex::new(None),
    });
    let output = LEDGER.scope(ledger.clone(), serving).await;
    let share = ledger
        .share
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    (output, share)
}

/// Charges `bytes` more of the response being gathered to its user;
/// false when that would pass a limit (the response must then stop). Free
/// outside a [`ledger`] (a server behind the front door).
pub fn charge(bytes: usize) -> bool {
    LEDGER
        .try_with(|ledger| {
            let mut share = ledger.share.lock().unwrap_or_else(|e| e.into_inner());
            match share.as_mut() {
                Some(share) => share.grow(bytes),
                None => {
                    *share = unread().acquire(&ledger.user, bytes);
                    share.is_some()
                }
            }
        })
        .unwrap_or(true)
}

/// `charged`, grown (or taken) to cover a body of `bytes` for `user`.
pub fn cover(charged: Option<Share>, user: &str, bytes: usize) -> Option<Share> {
    match charged {
        Some(mut share) => {
            let more = bytes.saturating_sub(share.amount);
            share.grow(more).then_some(share)
        }
        None => unread().acquire(user, bytes),
    }
}

/// A whole body as slices for the writer, holding `held` (its seats and
/// its bytes' charge) until the writer takes the last one; past `deadline`
/// it ends short of its length, and the writer closes the connection
/// (kube's timeout filter aborts a response still being written when the
/// request's time is up).
pub fn held_body(pieces: Vec<Bytes>, deadline: Instant, held: impl Send + 'static) -> BodyStream {
    let pieces: std::collections::VecDeque<Bytes> = pieces.into();
    Box::pin(futures::stream::unfold(
        (pieces, held),
        move |(mut rest, held)| async move {
            if Instant::now() > deadline {
                return None;
            }
            let mut piece = rest.pop_front()?;
            if piece.len() > HELD_SLICE {
                rest.push_front(piece.split_off(HELD_SLICE));
            }
            Some((piece, (rest, held)))
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use std::time::Duration;

    #[test]
    fn each_user_holds_a_bounded_share_and_all_users_a_bounded_total() {
        let open = PerUser::new(3, 5);
        let mut shares: Vec<Share> = (0..3).map(|_| open.acquire("alice", 1).unwrap()).collect();
        assert!(open.acquire("alice", 1).is_none());
        // Others are not affected, up to the total; a share given back can be taken again.
        let mut bob = open.acquire("bob", 1).unwrap();
        assert!(bob.grow(1));
        assert!(!bob.grow(1));
        assert!(open.acquire("carol", 1).is_none());
        shares.pop();
        assert!(open.acquire("alice", 1).is_some());
        drop((shares, bob));
        assert_eq!(*open.lock(), (0, HashMap::new()));
        assert!(open.acquire("dave", 6).is_none());
    }

    #[tokio::test]
    async fn a_ledger_charges_its_user_until_the_limit_and_hands_the_charge_back() {
        let ((), share) = ledger("mallory", async {
            assert!(charge(MAX_UNREAD_BYTES_PER_USER - 10));
            assert!(!charge(11));
            assert!(charge(10));
        })
        .await;
        let share = share.expect("a charge");
        assert_eq!(share.amount, MAX_UNREAD_BYTES_PER_USER);
        assert!(unread().acquire("mallory", 1).is_none());
        assert!(stalled("mallory") && !stalled("trent"));
        assert!(unread().acquire("trent", 1).is_some());
        drop(share);
        assert!(unread().acquire("mallory", 1).is_some());
        // Outside a ledger nothing is charged.
        assert!(charge(usize::MAX));
    }

    #[tokio::test]
    async fn a_held_body_gives_its_slices_then_what_it_held_and_stops_at_its_deadline() {
        let held = Arc::new(());
        let body = Bytes::from(vec![7u8; HELD_SLICE * 2 + 10]);
        let later = Instant::now() + Duration::from_secs(60);
        let mut stream = held_body(
            vec![body.clone(), Bytes::from_static(b"]")],
            later,
            held.clone(),
        );
        let mut lengths = Vec::new();
        while let Some(slice) = stream.next().await {
            lengths.push(slice.len());
            // Held until the writer has taken the last slice.
            assert_eq!(Arc::strong_count(&held), 2);
        }
        assert_eq!(lengths, [HELD_SLICE, HELD_SLICE, 10, 1]);
        drop(stream);
        assert_eq!(Arc::strong_count(&held), 1);
        // Past its deadline it ends short (the writer then closes the connection).
        let past = Instant::now() - Duration::from_secs(1);
        assert!(held_body(vec![body], past, ()).next().await.is_none());
    }
}
