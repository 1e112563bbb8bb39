//! What the informers of one API server have learned about its streaming
//! lists: whether it refused one. Shared by them (the registry holds one
//! for its client), so the refusal is met and said once per server. It
//! never lists anything.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Whether the server refused a streaming list. Cheap to clone; clones
/// share it.
#[derive(Debug, Clone, Default)]
pub(crate) struct StreamingLists {
    refused: Arc<AtomicBool>,
}

impl StreamingLists {
    /// Whether an informer of this server was refused a streaming list: a
    /// new informer lists in pages at once.
    pub(super) fn known_refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// The server refused a streaming list; true for the first informer to
    /// learn it (the one that says so), false for any informer that tried
    /// one at the same time.
    pub(super) fn refused(&self) -> bool {
        !self.refused.swap(true, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_one_informer_is_refused_a_streaming_list_every_later_one_knows() {
        let server = StreamingLists::default();
        let later = server.clone();
        assert!(!server.known_refused());
        assert!(server.refused(), "the first to learn it says so");
        assert!(!later.refused(), "one refused at the same time does not");
        assert!(later.known_refused());
        assert!(
            !StreamingLists::default().known_refused(),
            "another server is asked anew"
        );
    }
}
