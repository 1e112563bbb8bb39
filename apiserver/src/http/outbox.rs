//! The buffer between a watch's producer task and its HTTP response body:
//! counts the bytes queued for the client, tells the producer whether the
//! client is keeping up, and lets the producer cut a client off, which
//! frees everything queued at once — even while the connection is stuck
//! on a client that stopped reading. It never decides what to send or
//! when to give up; `watch` does.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};
use std::time::Duration;

use axum::body::{Body, Bytes};
use tokio::sync::Notify;
use tokio::time::Instant;

/// Why a line could not be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    /// The client went away (its response body was dropped).
    #[error("client went away")]
    Gone,
    /// The client left queued lines unread for the whole deadline, or let
    /// more than the byte budget pile up.
    #[error("client does not keep up")]
    Unresponsive,
}

#[derive(Debug)]
struct State {
    queue: VecDeque<Bytes>,
    bytes: usize,
    /// When the client last took a line, or when the queue last became non-empty.
    progress: Instant,
    /// No more lines; the body ends once the queue is drained.
    finished: bool,
    /// Cut off: the body ends with an error at once.
    cut: bool,
    /// The body was dropped.
    gone: bool,
    reader: Option<Waker>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Wakes the producer when the client took a line or went away.
    space: Notify,
    /// Wakes every waiter of [`Outbox::gone`] when the body is dropped.
    gone: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The producer's end.
#[derive(Debug)]
pub(crate) struct Outbox {
    shared: Arc<Shared>,
    budget: usize,
}

/// The body's end; dropping it (the client went away) tells the producer.
struct Reader {
    shared: Arc<Shared>,
}

impl Drop for Reader {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.gone = true;
        st.queue.clear();
        st.bytes = 0;
        drop(st);
        self.shared.space.notify_one();
        self.shared.gone.notify_waiters();
    }
}

/// An outbox holding at most `budget` bytes of queued lines (a single line
/// may exceed it) and the response body that drains it.
pub(crate) fn outbox(budget: usize) -> (Outbox, Body) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            bytes: 0,
            progress: Instant::now(),
            finished: false,
            cut: false,
            gone: false,
            reader: None,
        }),
        space: Notify::new(),
        gone: Notify::new(),
    });
    let reader = Reader {
        shared: shared.clone(),
    };
    let stream = futures::stream::poll_fn(move |cx| {
        let mut st = reader.shared.lock();
        if st.cut {
            return Poll::Ready(Some(Err(std::io::Error::other(
                "watch closed: client does not keep up",
            ))));
        }
        if let Some(line) = st.queue.pop_front() {
            st.bytes -= line.len();
            st.progress = Instant::now();
            drop(st);
            reader.shared.space.notify_one();
            return Poll::Ready(Some(Ok(line)));
        }
        if st.finished {
            return Poll::Ready(None);
        }
        st.reader = Some(cx.waker().clone());
        Poll::Pending
    });
    (
        Outbox {
            shared,
            budget: budget.max(1),
        },
        Body::from_stream(stream),
    )
}

impl Outbox {
    fn enqueue(st: &mut State, line: Bytes) {
        if st.queue.is_empty() {
            st.progress = Instant::now();
        }
        st.bytes += line.len();
        st.queue.push_back(line);
        if let Some(w) = st.reader.take() {
            w.wake();
        }
    }

    /// Queues `line`, waiting while the queue is over budget; gives up
    /// when the client has taken nothing for `deadline`.
    pub(crate) async fn send(&self, line: Bytes, deadline: Duration) -> Result<(), Refused> {
        loop {
            let wait_until = {
                let mut st = self.shared.lock();
                if st.gone {
                    return Err(Refused::Gone);
                }
                if st.queue.is_empty() || st.bytes + line.len() <= self.budget {
                    Self::enqueue(&mut st, line);
                    return Ok(());
                }
                st.progress
                    .checked_add(deadline)
                    .unwrap_or_else(|| st.progress + Duration::from_secs(86_400 * 365))
            };
            if tokio::time::timeout_at(wait_until, self.shared.space.notified())
                .await
                .is_err()
                && self.stalled_for() >= deadline
            {
                return Err(Refused::Unresponsive);
            }
        }
    }

    /// Queues `line` without waiting; refuses when that would put more
    /// than the budget in the queue (a lone line always fits).
    pub(crate) fn push(&self, line: Bytes) -> Result<(), Refused> {
        let mut st = self.shared.lock();
        if st.gone {
            return Err(Refused::Gone);
        }
        if !st.queue.is_empty() && st.bytes + line.len() > self.budget {
            return Err(Refused::Unresponsive);
        }
        Self::enqueue(&mut st, line);
        Ok(())
    }

    /// How long queued lines have waited without the client taking any
    /// (zero when nothing is queued).
    pub(crate) fn stalled_for(&self) -> Duration {
        let st = self.shared.lock();
        if st.queue.is_empty() {
            Duration::ZERO
        } else {
            st.progress.elapsed()
        }
    }

    /// Resolves when the client went away.
    pub(crate) async fn gone(&self) {
        loop {
            let notified = self.shared.gone.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.shared.lock().gone {
                return;
            }
            notified.await;
        }
    }

    /// Drops everything queued and ends the body with an error, so the
    /// connection is closed instead of finishing the response.
    pub(crate) fn cut(&self) {
        let mut st = self.shared.lock();
        st.cut = true;
        st.queue.clear();
        st.bytes = 0;
        if let Some(w) = st.reader.take() {
            w.wake();
        }
    }

    /// Bytes queued now.
    #[cfg(test)]
    pub(crate) fn queued_bytes(&self) -> usize {
        self.shared.lock().bytes
    }
}

impl Drop for Outbox {
    /// The producer is done: the body ends after the queued lines.
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.finished = true;
        if let Some(w) = st.reader.take() {
            w.wake();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn line(n: usize) -> Bytes {
        Bytes::from(vec![b'x'; n])
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_that_never_reads_is_refused_after_the_deadline_and_cut_frees_the_queue() {
        let (tx, _body) = outbox(10);
        tx.send(line(8), Duration::from_secs(5)).await.unwrap();
        // Over budget: waits for the client, which never reads.
        let refused = tx.send(line(8), Duration::from_secs(5)).await;
        assert_eq!(refused, Err(Refused::Unresponsive));
        assert!(tx.stalled_for() >= Duration::from_secs(5));
        assert_eq!(tx.push(line(8)), Err(Refused::Unresponsive));
        tx.cut();
        assert_eq!(tx.queued_bytes(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reading_client_gets_every_line_in_order_and_the_end() {
        let (tx, body) = outbox(10);
        let mut stream = body.into_data_stream();
        let producer = tokio::spawn(async move {
            for i in 0..20u8 {
                tx.send(Bytes::from(vec![i; 6]), Duration::from_secs(5))
                    .await
                    .unwrap();
            }
        });
        let mut got = Vec::new();
        while let Some(chunk) = stream.next().await {
            got.push(chunk.unwrap()[0]);
        }
        producer.await.unwrap();
        assert_eq!(got, (0..20).collect::<Vec<_>>());
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_body_is_reported_as_gone() {
        let (tx, body) = outbox(10);
        tx.push(line(4)).unwrap();
        drop(body);
        tx.gone().await;
        assert_eq!(tx.push(line(1)), Err(Refused::Gone));
        assert_eq!(
            tx.send(line(1), Duration::from_secs(1)).await,
            Err(Refused::Gone)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_cut_body_ends_with_an_error() {
        let (tx, body) = outbox(10);
        tx.push(line(4)).unwrap();
        tx.cut();
        let mut stream = body.into_data_stream();
        assert!(stream.next().await.unwrap().is_err());
    }
}
