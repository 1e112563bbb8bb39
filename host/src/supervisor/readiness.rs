//! Readiness over every guest: the first guest not running yet or whose
//! watch has failed for too long, and the refused guests `/readyz` lists.
//! It never changes what runs.

use super::*;

impl Supervisor {
    /// Readiness: Ok once every guest runs and every cache of every guest
    /// has synced (followers' too: a warm standby must be able to take
    /// over; a guest standing by cold has none);
    /// otherwise which guest waits, and for what (a kind not served yet, its
    /// caches, or a watch failing past `--unhealthy-watch-seconds`).
    pub fn readiness(&self) -> Result<(), NotSynced> {
        if let Some((guest, kind)) = self.waiting.any() {
            return Err(NotSynced {
                guest,
                why: waiting::waiting_for(&kind),
            });
        }
        if let Some((guest, why)) = self.pending_pulls.any_not_running() {
            return Err(NotSynced {
                guest,
                why: format!("waiting for its registry: {why}"),
            });
        }
        let guests = self.controllers();
        match guests.iter().find(|g| !g.is_synced()) {
            None => unready_guest(&guests).map_or(Ok(()), Err),
            Some(g) => Err(NotSynced {
                guest: g.name().to_string(),
                why: "caches not synced".into(),
            }),
        }
    }

    /// One line per guest refused at load of which no version runs, for
    /// `/readyz`'s detail: `refused: guest NAME: why`.
    pub fn refused(&self) -> Vec<String> {
        lock(&self.refused)
            .values()
            .map(|r| format!("refused: {}", r.why))
            .collect()
    }

    /// Whether every guest's caches have synced.
    pub fn is_synced(&self) -> bool {
        self.readiness().is_ok()
    }
}

/// The first guest with a watch failing for longer than its informer
/// tolerates before reporting not ready, and why.
fn unready_guest<'a>(
    guests: impl IntoIterator<Item = &'a Arc<crate::controller::GuestController>>,
) -> Option<NotSynced> {
    guests.into_iter().find_map(|g| {
        g.unhealthy_watch().map(|why| NotSynced {
            guest: g.name().to_string(),
            why,
        })
    })
}
