//! The connection under the gRPC server: what one turn of h2's connection task writes goes out
//! in one system call.
//!
//! h2 writes a DATA frame of 256 bytes or more by reference and flushes it before it takes the
//! next frame, so a unary answer (HEADERS, DATA, trailers) over 256 bytes took two `writev`s
//! (the trailers, 10 bytes, alone in the second TCP segment) where HTTP/1 takes one
//! (BENCHMARKS.md, "gRPC front end"). [`Coalescing`] keeps what h2 writes and answers the
//! first flush of a turn at once, writing nothing, and wakes the connection's task; the bytes
//! go out at the next flush of the same turn (the one after the trailers) or, when that turn
//! flushes only once, when the task runs again, before it reads (every turn of h2's
//! connection reads, or flushes, or shuts down, and each of those writes what is held first).
//! Nothing is held across a wait: a turn always ends with the bytes written or the task woken
//! to write them. Reads pass through.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Held bytes beyond which a write goes out at once, flush or not.
const HOLD_LIMIT: usize = 64 * 1024;

/// A connection whose flushes are coalesced, see the module documentation.
#[derive(Debug)]
pub struct Coalescing<T> {
    inner: T,
    /// What h2 wrote and the socket has not taken yet, from `sent` on.
    held: Vec<u8>,
    sent: usize,
    /// A flush was answered without writing: the held bytes are owed to the socket.
    owed: bool,
}

impl<T> Coalescing<T> {
    pub fn new(inner: T) -> Self {
        Coalescing {
            inner,
            held: Vec::new(),
            sent: 0,
            owed: false,
        }
    }
}

impl<T: AsyncWrite + Unpin> Coalescing<T> {
    /// Write every held byte, then flush the socket.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.held.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.held[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.held.clear();
        self.sent = 0;
        self.owed = false;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    /// Make room before holding more: write what is held once it passes [`HOLD_LIMIT`].
    fn poll_room(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.held.len() >= HOLD_LIMIT {
            ready!(self.poll_drain(cx))?;
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for Coalescing<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.owed {
            // A full socket (Pending) does not stop reading: its readiness wakes the task.
            if let Poll::Ready(Err(e)) = this.poll_drain(cx) {
                return Poll::Ready(Err(e));
            }
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Coalescing<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_room(cx))?;
        this.held.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_room(cx))?;
        let mut n = 0;
        for buf in bufs {
            this.held.extend_from_slice(buf);
            n += buf.len();
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.held.len() == this.sent {
            return Poll::Ready(Ok(()));
        }
        if !this.owed {
            // The first flush of a turn: answered now, written at the next one or when the
            // task runs again (module documentation).
            this.owed = true;
            cx.waker().wake_by_ref();
            return Poll::Ready(Ok(()));
        }
        this.poll_drain(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

impl<T: tonic::transport::server::Connected> tonic::transport::server::Connected for Coalescing<T> {
    type ConnectInfo = T::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    use super::*;

    /// A socket that records every write it is given and never has anything to read.
    #[derive(Default)]
    struct Socket {
        writes: Vec<Vec<u8>>,
    }

    impl AsyncRead for Socket {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Poll::Pending
        }
    }

    impl AsyncWrite for Socket {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.get_mut().writes.push(buf.to_vec());
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// Counts its wake-ups.
    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn write_and_flush(conn: &mut Coalescing<Socket>, cx: &mut Context<'_>, bytes: &[u8]) {
        let slices = [io::IoSlice::new(&bytes[..1]), io::IoSlice::new(&bytes[1..])];
        let written = Pin::new(&mut *conn).poll_write_vectored(cx, &slices);
        assert!(matches!(written, Poll::Ready(Ok(n)) if n == bytes.len()));
        assert!(matches!(
            Pin::new(&mut *conn).poll_flush(cx),
            Poll::Ready(Ok(()))
        ));
    }

    /// h2's unary answer: HEADERS and DATA, a flush, the trailers, a flush: one write.
    #[test]
    fn two_flushes_of_a_turn_are_one_write() {
        let wakes = Arc::new(Wakes::default());
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        let mut conn = Coalescing::new(Socket::default());
        write_and_flush(&mut conn, &mut cx, b"headers+data");
        assert!(conn.inner.writes.is_empty());
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
        write_and_flush(&mut conn, &mut cx, b"trailers");
        assert_eq!(conn.inner.writes, vec![b"headers+datatrailers".to_vec()]);
        assert!(!conn.owed && conn.held.is_empty());
    }

    /// A turn that flushes once: the bytes go out when the woken task reads, before the read.
    #[test]
    fn a_lone_flush_is_written_by_the_next_read() {
        let wakes = Arc::new(Wakes::default());
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        let mut conn = Coalescing::new(Socket::default());
        write_and_flush(&mut conn, &mut cx, b"window update");
        assert_eq!(
            wakes.0.load(Ordering::SeqCst),
            1,
            "the task is woken to write"
        );
        let mut space = [0u8; 16];
        let mut buf = ReadBuf::new(&mut space);
        assert!(Pin::new(&mut conn)
            .poll_read(&mut cx, &mut buf)
            .is_pending());
        assert_eq!(conn.inner.writes, vec![b"window update".to_vec()]);
        // Nothing held: a flush now writes nothing and wakes nobody.
        assert!(matches!(
            Pin::new(&mut conn).poll_flush(&mut cx),
            Poll::Ready(Ok(()))
        ));
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
        assert_eq!(conn.inner.writes.len(), 1);
    }

    /// Shutting down writes what is held first.
    #[test]
    fn shutdown_writes_what_is_held() {
        let waker = Waker::from(Arc::new(Wakes::default()));
        let mut cx = Context::from_waker(&waker);
        let mut conn = Coalescing::new(Socket::default());
        write_and_flush(&mut conn, &mut cx, b"goaway");
        assert!(matches!(
            Pin::new(&mut conn).poll_shutdown(&mut cx),
            Poll::Ready(Ok(()))
        ));
        assert_eq!(conn.inner.writes, vec![b"goaway".to_vec()]);
    }
}
