//! The governed WASI surface every guest gets, from `wasmtime-wasi`: what
//! language runtimes (CPython, QuickJS, Rust's `std`) need to start and
//! print, under the sandbox's policy, and nothing that gives authority.
//! It never grants a file, a socket, the host's environment or the host's
//! clock.
//!
//! # The policy
//! - `wasi:cli/stdout`, `stderr`: the guest's log ([`super::stdio`]), at
//!   most `MAX_HANDLES_PER_CALL` streams and pollables per call;
//!   `stdin` is empty; environment and arguments are empty; no terminal.
//! - `wasi:clocks`: the wall clock and the monotonic clock both read the
//!   call's `env.now-ms` (the monotonic clock in nanoseconds); they advance
//!   only when the host starts another call, so a shadow run or a replay
//!   of the same request sees the same time. A sleep (a clock
//!   subscription) is ready at once and does not move the clock.
//! - `wasi:random`: deterministic, seeded from the call (the request's key
//!   and `env.now-ms`): the same request gives the same bytes. Not for
//!   secrets. `insecure-seed` is a fixed value.
//! - `wasi:filesystem`: linked with no preopened directory: there is no
//!   file to open.
//! - `wasi:sockets`: linked, every operation denied (no TCP, no UDP, no
//!   name lookup, every address refused).
//! - `wasi:http` is not provided: [`super::imports`] refuses it at load.
//!
//! # Never blocking
//! wasmtime-wasi's synchronous bindings wait on a tokio runtime, which
//! panics on a thread already driving one. Here nothing a guest can reach
//! ever waits (its streams are memory, its clock subscriptions are ready),
//! so `wasi:io` and the monotonic clock are served by polling once
//! (`at_once`); something not ready would trap, never block.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings as p2;
use wasmtime_wasi::p2::{DynOutputStream, DynPollable, StreamError, StreamResult};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::stdio::{GuestStream, SharedOutput};
use super::CallState;

/// The `insecure-seed` every guest gets (a fixed value: see the module's
/// text).
const INSECURE_SEED: u128 = 0x7761_736d_6374_726c_2d69_6e73_6563_7572;

/// One store's WASI state: wasmtime-wasi's context and resource table, and
/// the clock and random streams the host moves between calls.
pub struct Wasi {
    ctx: WasiCtx,
    table: ResourceTable,
    now_ms: Arc<AtomicU64>,
    secure: Arc<Mutex<SeededStream>>,
    insecure: Arc<Mutex<SeededStream>>,
}

impl Wasi {
    /// The policy's context for `guest`, its output going to `output`.
    pub fn new(guest: Arc<str>, output: SharedOutput) -> Self {
        let now_ms = Arc::new(AtomicU64::new(0));
        // Until the first call: seeded from no key at time 0.
        let secure = Arc::new(Mutex::new(SeededStream::new("random", "", 0)));
        let insecure = Arc::new(Mutex::new(SeededStream::new("insecure", "", 0)));
        let mut b = WasiCtx::builder();
        b.stdout(GuestStream::stdout(guest.clone(), output.clone()))
            .stderr(GuestStream::stderr(guest, output))
            .wall_clock(CallClock(now_ms.clone()))
            .monotonic_clock(CallClock(now_ms.clone()))
            .secure_random(SeededRandom(secure.clone()))
            .insecure_random(SeededRandom(insecure.clone()))
            .insecure_random_seed(INSECURE_SEED)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }));
        Wasi {
            ctx: b.build(),
            table: ResourceTable::new(),
            now_ms,
            secure,
            insecure,
        }
    }

    /// Sets the clocks to `now_ms` and reseeds both random streams from
    /// `key` and `now_ms`: what the next call sees.
    pub fn at(&mut self, now_ms: u64, key: &str) {
        self.now_ms.store(now_ms, Ordering::Relaxed);
        for (stream, domain) in [(&self.secure, "random"), (&self.insecure, "insecure")] {
            *crate::sync::lock(stream) = SeededStream::new(domain, key, now_ms);
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi.ctx,
            table: &mut self.wasi.table,
        }
    }
}

/// Both clocks: the call's `env.now-ms`.
struct CallClock(Arc<AtomicU64>);

impl wasmtime_wasi::HostWallClock for CallClock {
    fn resolution(&self) -> Duration {
        Duration::from_millis(1)
    }

    fn now(&self) -> Duration {
        Duration::from_millis(self.0.load(Ordering::Relaxed))
    }
}

impl wasmtime_wasi::HostMonotonicClock for CallClock {
    fn resolution(&self) -> u64 {
        1_000_000
    }

    fn now(&self) -> u64 {
        self.0.load(Ordering::Relaxed).saturating_mul(1_000_000)
    }
}

/// A deterministic byte stream: SHA-256 of (domain, key, now, block
/// number), block after block.
struct SeededStream {
    seed: [u8; 32],
    block: u64,
    buf: [u8; 32],
    used: usize,
}

impl SeededStream {
    fn new(domain: &str, key: &str, now_ms: u64) -> Self {
        let mut h = Sha256::new();
        for part in [domain.as_bytes(), key.as_bytes()] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.update(now_ms.to_le_bytes());
        SeededStream {
            seed: h.finalize().into(),
            block: 0,
            buf: [0; 32],
            used: 32,
        }
    }

    fn fill(&mut self, dst: &mut [u8]) {
        for byte in dst {
            if self.used == self.buf.len() {
                let mut h = Sha256::new();
                h.update(self.seed);
                h.update(self.block.to_le_bytes());
                self.buf = h.finalize().into();
                self.block += 1;
                self.used = 0;
            }
            *byte = self.buf[self.used];
            self.used += 1;
        }
    }
}

/// `wasi:random` over a [`SeededStream`] the host reseeds per call.
struct SeededRandom(Arc<Mutex<SeededStream>>);

impl rand_core::TryRng for SeededRandom {
    type Error = std::convert::Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        let mut b = [0; 4];
        self.try_fill_bytes(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        let mut b = [0; 8];
        self.try_fill_bytes(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        crate::sync::lock(&self.0).fill(dst);
        Ok(())
    }
}

/// Runs `f` to completion if it completes on its first poll; anything
/// that would wait is a trap (see the module's text: nothing a guest can
/// reach waits).
fn at_once<F: Future>(f: F) -> wasmtime::Result<F::Output> {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => Ok(v),
        std::task::Poll::Pending => Err(wasmtime::Error::msg(
            "the guest waited on something that is never ready in the sandbox",
        )),
    }
}

fn stream_at_once<T>(f: impl Future<Output = StreamResult<T>>) -> StreamResult<T> {
    at_once(f).map_err(StreamError::Trap)?
}

/// The part of a store `wasi:io`, stdout, stderr and the monotonic clock
/// are served from.
pub struct Governed<'a> {
    table: &'a mut ResourceTable,
    now_ms: &'a AtomicU64,
    guest: &'a Arc<str>,
    output: &'a SharedOutput,
}

struct GovernedData;

impl HasData for GovernedData {
    type Data<'a> = Governed<'a>;
}

fn governed(state: &mut CallState) -> Governed<'_> {
    Governed {
        table: &mut state.wasi.table,
        now_ms: &state.wasi.now_ms,
        guest: &state.guest,
        output: &state.output,
    }
}

/// A clock subscription: ready at once (the clock does not move).
struct Ready;

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi::p2::Pollable for Ready {
    async fn ready(&mut self) {}
}

impl Governed<'_> {
    /// Counts one more handle handed to the guest in this call; past
    /// [`MAX_HANDLES_PER_CALL`] the call traps.
    fn new_handle(&self) -> wasmtime::Result<()> {
        crate::sync::lock(self.output).new_handle(MAX_HANDLES_PER_CALL)
    }

    fn ready(&mut self) -> wasmtime::Result<Resource<DynPollable>> {
        self.new_handle()?;
        let ready = self.table.push(Ready)?;
        wasmtime_wasi::p2::subscribe(self.table, ready)
    }

    fn stream(&mut self, stream: GuestStream) -> wasmtime::Result<Resource<DynOutputStream>> {
        self.new_handle()?;
        let stream: DynOutputStream = Box::new(stream);
        Ok(self.table.push(stream)?)
    }
}

/// Stream and pollable handles one call may obtain (std takes four): the
/// cap keeps a guest from growing the host's handle table in a loop.
const MAX_HANDLES_PER_CALL: u32 = 256;

/// Defines the policy's WASI (every `wasi:cli`, `wasi:clocks`,
/// `wasi:random`, `wasi:io`, `wasi:filesystem` and `wasi:sockets`
/// interface of WASI 0.2; a guest importing any 0.2.x version links to
/// them) in `linker`.
pub fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_sync(linker)?;
    // Replaced: what would wait on a tokio runtime (see the module's text).
    linker.allow_shadowing(true);
    p2::sync::io::poll::add_to_linker::<_, GovernedData>(linker, governed)?;
    p2::sync::io::streams::add_to_linker::<_, GovernedData>(linker, governed)?;
    p2::clocks::monotonic_clock::add_to_linker::<_, GovernedData>(linker, governed)?;
    p2::sync::sockets::udp_create_socket::add_to_linker::<_, GovernedData>(linker, governed)?;
    p2::cli::stdout::add_to_linker::<_, GovernedData>(linker, governed)?;
    p2::cli::stderr::add_to_linker::<_, GovernedData>(linker, governed)?;
    linker.allow_shadowing(false);
    Ok(())
}

/// The WASI 0.2 packages [`add_to_linker`] defines: an import of any
/// 0.2.x version of their interfaces links to them.
const PROVIDED: &[&str] = &[
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:random/",
    "wasi:io/",
    "wasi:filesystem/",
    "wasi:sockets/",
];

/// Defines every import of `component` that is neither the contract nor
/// WASI 0.2 of `PROVIDED` to trap when called. (wasmtime's
/// `define_unknown_imports_as_traps` would also shadow a WASI import of
/// another 0.2.x version than the linker's with traps: it looks names up
/// exactly, while instantiation matches them by semver.)
pub fn define_others_as_traps(
    linker: &mut Linker<CallState>,
    component: &wasmtime::component::Component,
    engine: &wasmtime::Engine,
) -> wasmtime::Result<()> {
    use wasmtime::component::types::ComponentItem;
    let ours = |name: &str| {
        name.starts_with("wasmctrl:controller/")
            || PROVIDED.iter().any(|p| name.starts_with(p)) && name.contains("@0.2.")
    };
    for (name, item) in component.component_type().imports(engine) {
        if ours(name) {
            continue;
        }
        let ComponentItem::ComponentInstance(instance) = item.ty else {
            continue;
        };
        let mut stub = linker.instance(name)?;
        for (export, item) in instance.exports(engine) {
            match item.ty {
                ComponentItem::ComponentFunc(_) => {
                    let what = format!("{name}#{export}");
                    stub.func_new(export, move |_, _, _, _| {
                        Err(wasmtime::Error::msg(format!(
                            "{what} is not provided by the host (the sandbox grants only the wasmctrl contract and its governed WASI)"
                        )))
                    })?;
                }
                ComponentItem::Resource(_) => {
                    stub.resource(
                        export,
                        wasmtime::component::ResourceType::host::<()>(),
                        |_, _| Ok(()),
                    )?;
                }
                _ => {}
            }
        }
    }
    Ok(())
}

mod io {
    //! `wasi:io` poll and streams over wasmtime-wasi's own implementations,
    //! each polled once ([`super::at_once`]).

    use super::*;
    use p2::io::poll as async_poll;
    use p2::io::streams as async_streams;
    use p2::sync::io::{poll, streams};
    use wasmtime_wasi::p2::{DynInputStream, DynOutputStream};

    impl poll::Host for Governed<'_> {
        fn poll(&mut self, pollables: Vec<Resource<DynPollable>>) -> wasmtime::Result<Vec<u32>> {
            at_once(async_poll::Host::poll(self.table, pollables))?
        }
    }

    impl poll::HostPollable for Governed<'_> {
        fn ready(&mut self, p: Resource<DynPollable>) -> wasmtime::Result<bool> {
            at_once(async_poll::HostPollable::ready(self.table, p))?
        }
        fn block(&mut self, p: Resource<DynPollable>) -> wasmtime::Result<()> {
            at_once(async_poll::HostPollable::block(self.table, p))?
        }
        fn drop(&mut self, p: Resource<DynPollable>) -> wasmtime::Result<()> {
            async_poll::HostPollable::drop(self.table, p)
        }
    }

    impl streams::Host for Governed<'_> {
        fn convert_stream_error(
            &mut self,
            err: StreamError,
        ) -> wasmtime::Result<streams::StreamError> {
            Ok(
                match async_streams::Host::convert_stream_error(self.table, err)? {
                    async_streams::StreamError::LastOperationFailed(e) => {
                        streams::StreamError::LastOperationFailed(e)
                    }
                    async_streams::StreamError::Closed => streams::StreamError::Closed,
                },
            )
        }
    }

    type Out = Resource<DynOutputStream>;
    type In = Resource<DynInputStream>;

    impl p2::cli::stdout::Host for Governed<'_> {
        fn get_stdout(&mut self) -> wasmtime::Result<Out> {
            self.stream(GuestStream::stdout(self.guest.clone(), self.output.clone()))
        }
    }

    impl p2::cli::stderr::Host for Governed<'_> {
        fn get_stderr(&mut self) -> wasmtime::Result<Out> {
            self.stream(GuestStream::stderr(self.guest.clone(), self.output.clone()))
        }
    }

    impl streams::HostOutputStream for Governed<'_> {
        fn drop(&mut self, s: Out) -> wasmtime::Result<()> {
            at_once(async_streams::HostOutputStream::drop(self.table, s))?
        }
        fn check_write(&mut self, s: Out) -> StreamResult<u64> {
            async_streams::HostOutputStream::check_write(self.table, s)
        }
        fn write(&mut self, s: Out, bytes: Vec<u8>) -> StreamResult<()> {
            async_streams::HostOutputStream::write(self.table, s, bytes)
        }
        fn blocking_write_and_flush(&mut self, s: Out, bytes: Vec<u8>) -> StreamResult<()> {
            stream_at_once(async_streams::HostOutputStream::blocking_write_and_flush(
                self.table, s, bytes,
            ))
        }
        fn blocking_write_zeroes_and_flush(&mut self, s: Out, len: u64) -> StreamResult<()> {
            stream_at_once(
                async_streams::HostOutputStream::blocking_write_zeroes_and_flush(
                    self.table, s, len,
                ),
            )
        }
        fn subscribe(&mut self, s: Out) -> wasmtime::Result<Resource<DynPollable>> {
            self.new_handle()?;
            async_streams::HostOutputStream::subscribe(self.table, s)
        }
        fn write_zeroes(&mut self, s: Out, len: u64) -> StreamResult<()> {
            async_streams::HostOutputStream::write_zeroes(self.table, s, len)
        }
        fn flush(&mut self, s: Out) -> StreamResult<()> {
            async_streams::HostOutputStream::flush(self.table, s)
        }
        fn blocking_flush(&mut self, s: Out) -> StreamResult<()> {
            stream_at_once(async_streams::HostOutputStream::blocking_flush(
                self.table, s,
            ))
        }
        fn splice(&mut self, dst: Out, src: In, len: u64) -> StreamResult<u64> {
            async_streams::HostOutputStream::splice(self.table, dst, src, len)
        }
        fn blocking_splice(&mut self, dst: Out, src: In, len: u64) -> StreamResult<u64> {
            stream_at_once(async_streams::HostOutputStream::blocking_splice(
                self.table, dst, src, len,
            ))
        }
    }

    impl streams::HostInputStream for Governed<'_> {
        fn drop(&mut self, s: In) -> wasmtime::Result<()> {
            at_once(async_streams::HostInputStream::drop(self.table, s))?
        }
        fn read(&mut self, s: In, len: u64) -> StreamResult<Vec<u8>> {
            async_streams::HostInputStream::read(self.table, s, len)
        }
        fn blocking_read(&mut self, s: In, len: u64) -> StreamResult<Vec<u8>> {
            stream_at_once(async_streams::HostInputStream::blocking_read(
                self.table, s, len,
            ))
        }
        fn skip(&mut self, s: In, len: u64) -> StreamResult<u64> {
            async_streams::HostInputStream::skip(self.table, s, len)
        }
        fn blocking_skip(&mut self, s: In, len: u64) -> StreamResult<u64> {
            stream_at_once(async_streams::HostInputStream::blocking_skip(
                self.table, s, len,
            ))
        }
        fn subscribe(&mut self, s: In) -> wasmtime::Result<Resource<DynPollable>> {
            self.new_handle()?;
            async_streams::HostInputStream::subscribe(self.table, s)
        }
    }
}

mod clock {
    //! The monotonic clock: the call's `env.now-ms`, subscriptions ready at
    //! once.

    use super::*;
    use p2::clocks::monotonic_clock::{Duration as Nanos, Host, Instant};

    impl Host for Governed<'_> {
        fn now(&mut self) -> wasmtime::Result<Instant> {
            Ok(self
                .now_ms
                .load(Ordering::Relaxed)
                .saturating_mul(1_000_000))
        }
        fn resolution(&mut self) -> wasmtime::Result<Nanos> {
            Ok(1_000_000)
        }
        fn subscribe_instant(&mut self, _when: Instant) -> wasmtime::Result<Resource<DynPollable>> {
            self.ready()
        }
        fn subscribe_duration(&mut self, _when: Nanos) -> wasmtime::Result<Resource<DynPollable>> {
            self.ready()
        }
    }
}

mod sockets {
    //! UDP sockets are never created (wasmtime-wasi's version waits on a
    //! tokio runtime before it finds UDP disallowed).

    use super::*;
    use p2::sockets::network::{self, ErrorCode};
    use p2::sync::sockets::udp::IpAddressFamily;
    use p2::sync::sockets::udp_create_socket::Host;
    use wasmtime_wasi::p2::{SocketError, SocketResult, UdpSocket};

    impl network::Host for Governed<'_> {
        fn convert_error_code(&mut self, error: SocketError) -> wasmtime::Result<ErrorCode> {
            error.downcast()
        }
        fn network_error_code(
            &mut self,
            _: Resource<network::Error>,
        ) -> wasmtime::Result<Option<ErrorCode>> {
            Ok(None)
        }
    }

    impl network::HostNetwork for Governed<'_> {
        fn drop(&mut self, this: Resource<network::Network>) -> wasmtime::Result<()> {
            self.table.delete(this)?;
            Ok(())
        }
    }

    impl Host for Governed<'_> {
        fn create_udp_socket(&mut self, _: IpAddressFamily) -> SocketResult<Resource<UdpSocket>> {
            Err(ErrorCode::AccessDenied.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SeededStream;

    #[test]
    fn the_same_request_draws_the_same_bytes_and_another_request_others() {
        let draw = |key: &str, now: u64| {
            let mut s = SeededStream::new("random", key, now);
            let mut b = [0u8; 80];
            s.fill(&mut b[..7]);
            s.fill(&mut b[7..]);
            b
        };
        assert_eq!(draw("ns/a", 5), draw("ns/a", 5));
        assert_ne!(draw("ns/a", 5), draw("ns/b", 5));
        assert_ne!(draw("ns/a", 5), draw("ns/a", 6));
        assert_ne!(draw("ns/a", 5)[..32], draw("ns/a", 5)[32..64]);
    }
}
