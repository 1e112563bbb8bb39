//! The decoded form of the last few large objects written, by their
//! stored JSON, so a write that just encoded a large object need not
//! decode it again to answer. It never decodes anything itself and
//! never hands out a value for JSON it was not given (the very bytes,
//! not equal ones).

use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

use super::record::Stored;

/// How many decoded objects [`Decoded::keep`] keeps.
const RECENT: usize = 2;

/// Smallest stored JSON [`Decoded::keep`] keeps the decoded form of:
/// decoding a smaller object costs little.
const RECENT_MIN_BYTES: usize = 64 * 1024;

/// The decoded objects kept, oldest first.
#[derive(Debug, Default)]
pub(super) struct Decoded(Mutex<Vec<(Arc<[u8]>, Value)>>);

impl Decoded {
    fn lock(&self) -> MutexGuard<'_, Vec<(Arc<[u8]>, Value)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `stored`'s object decoded: the kept value when it is one of them
    /// (taken, so given once), decoded from its JSON otherwise.
    pub(super) fn take(&self, stored: &Stored) -> Value {
        if stored.json.len() >= RECENT_MIN_BYTES {
            let mut recent = self.lock();
            if let Some(i) = recent
                .iter()
                .position(|(json, _)| Arc::ptr_eq(json, &stored.json))
            {
                return recent.remove(i).1;
            }
        }
        stored.value()
    }

    /// Keeps `value`, what `json` decodes to, when `json` is large; the
    /// oldest kept one goes.
    pub(super) fn keep(&self, json: &Arc<[u8]>, value: Value) {
        if json.len() < RECENT_MIN_BYTES {
            return;
        }
        let mut recent = self.lock();
        recent.retain(|(kept, _)| !Arc::ptr_eq(kept, json));
        if recent.len() >= RECENT {
            recent.remove(0);
        }
        recent.push((json.clone(), value));
    }
}
