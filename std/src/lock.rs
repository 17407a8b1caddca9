//! Locking a mutex whose previous holder panicked.
//!
//! Every mutex in Rackproof guards state that stays consistent between statements (a map, a
//! counter, a setting), so a panic while holding it leaves nothing half-written; the panic
//! itself is reported where it happened. Refusing the lock afterwards would turn one failure
//! into a cascade of unrelated ones, so every lock ignores poisoning, through this trait.

use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

/// [`Mutex::lock`] and [`Mutex::try_lock`] without poisoning.
pub trait LockExt<T: ?Sized> {
    /// The guard, waiting for the lock; a poisoned mutex is locked all the same.
    fn locked(&self) -> MutexGuard<'_, T>;

    /// The guard if the lock is free now (poisoned or not); `None` while another holds it.
    fn try_locked(&self) -> Option<MutexGuard<'_, T>>;
}

impl<T: ?Sized> LockExt<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn try_locked(&self) -> Option<MutexGuard<'_, T>> {
        match self.try_lock() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// A mutex whose holder panicked after writing `value`.
    fn poisoned(value: u32) -> Arc<Mutex<u32>> {
        let mutex = Arc::new(Mutex::new(0));
        let holder = Arc::clone(&mutex);
        let panicked = std::thread::spawn(move || {
            let mut guard = holder.lock().unwrap();
            *guard = value;
            panic!("the holder panics with the lock held");
        })
        .join();
        assert!(panicked.is_err());
        assert!(mutex.is_poisoned());
        mutex
    }

    #[test]
    fn a_poisoned_mutex_locks_with_what_its_holder_wrote() {
        let mutex = poisoned(7);
        assert_eq!(*mutex.locked(), 7);
        *mutex.locked() = 8;
        assert_eq!(*mutex.locked(), 8);
    }

    #[test]
    fn try_locked_takes_a_free_mutex_poisoned_or_not() {
        assert_eq!(Mutex::new(3).try_locked().as_deref(), Some(&3));
        assert_eq!(poisoned(5).try_locked().as_deref(), Some(&5));
    }

    #[test]
    fn try_locked_is_none_while_another_holds_the_lock() {
        let mutex = Mutex::new(1);
        let held = mutex.locked();
        assert!(mutex.try_locked().is_none());
        drop(held);
        assert!(mutex.try_locked().is_some());
    }
}
