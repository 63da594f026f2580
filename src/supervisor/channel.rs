//! The channel into a child: its stdin as a pipe that orchestrate writes, for a backend that
//! talks to its child (a protocol over stdio, such as ACP's JSON-RPC).
//!
//! Two halves. [`ChildInput`] is the handle writers hold (a dialect, and whatever else
//! must reach the running child): it queues whole lines and never blocks. [`InputPipe`] is
//! the supervisor's half: its `select!` loop writes the queue into the pipe as the child
//! reads it, so that a child that stops reading can never stall the loop (its timers, its
//! kills). Everything written is copied, byte for byte, into the run's record of the
//! child's input.
//!
//! The queue is bounded ([`MAX_PENDING_INPUT_BYTES`]): past it a write is refused rather
//! than held, since a child that reads nothing would otherwise grow it without end. Once
//! the child has closed its end (or exited), writes are refused too.

// The writers' side is used by the tests until a talking dialect uses it (the next change).
#![cfg_attr(not(test), allow(dead_code))]

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;
use tokio::sync::Notify;

/// Bytes queued for the child and not yet written; a write past it is refused.
pub(crate) const MAX_PENDING_INPUT_BYTES: usize = 16 * 1024 * 1024;
/// Bytes handed to one `write` of the pipe.
const WRITE_CHUNK_BYTES: usize = 64 * 1024;

/// Why a write to the child was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InputError {
    /// Closed by orchestrate (the input is over), or by the child (it exited or closed its
    /// stdin; the reason is the pipe's error).
    #[error("the child's input is closed{}", .0.as_deref().map(|why| format!(": {why}")).unwrap_or_default())]
    Closed(Option<String>),
    #[error("the child is not reading its input: {pending} bytes are still waiting (at most {max})", max = MAX_PENDING_INPUT_BYTES)]
    Full { pending: usize },
}

/// A writer's handle on the child's stdin: cheap to clone, usable from any thread.
#[derive(Debug, Clone, Default)]
pub struct ChildInput {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    queue: Mutex<Queue>,
    /// Wakes the supervisor's loop when something was queued from outside it.
    wake: Notify,
}

#[derive(Debug, Default)]
struct Queue {
    pending: VecDeque<u8>,
    /// No more writes: the pipe closes once `pending` is written.
    closing: bool,
    /// The pipe is gone (the child closed it, or the run ended): why, if it failed.
    gone: Option<Option<String>>,
}

impl ChildInput {
    pub(crate) fn new() -> ChildInput {
        ChildInput::default()
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        // A writer that panicked mid-append left at worst a partial line; the pipe goes on.
        self.shared
            .queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `line` and a newline. A line is queued whole or not at all.
    pub(crate) fn send_line(&self, line: &[u8]) -> Result<(), InputError> {
        let mut q = self.queue();
        if let Some(why) = &q.gone {
            return Err(InputError::Closed(why.clone()));
        }
        if q.closing {
            return Err(InputError::Closed(None));
        }
        if q.pending.len() + line.len() + 1 > MAX_PENDING_INPUT_BYTES {
            return Err(InputError::Full {
                pending: q.pending.len(),
            });
        }
        q.pending.extend(line);
        q.pending.push_back(b'\n');
        drop(q);
        self.shared.wake.notify_one();
        Ok(())
    }

    /// Queues `value` as one line of JSON.
    pub(crate) fn send_json(&self, value: &impl serde::Serialize) -> Result<(), InputError> {
        let line = serde_json::to_vec(value).expect("serializing to memory cannot fail");
        self.send_line(&line)
    }

    /// Ends the input: what is queued is still written, then the child reads end of file.
    pub(crate) fn close(&self) {
        self.queue().closing = true;
        self.shared.wake.notify_one();
    }

    /// Whether a write could still reach the child.
    pub(crate) fn is_open(&self) -> bool {
        let q = self.queue();
        !q.closing && q.gone.is_none()
    }

    /// Waits until a writer queued something or closed the input (for the supervisor's
    /// loop, which sees its own writes at its next turn but must wake for others').
    pub(crate) async fn queued(&self) {
        self.shared.wake.notified().await
    }

    /// Bytes queued and not yet written.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.queue().pending.len()
    }

    /// Takes the lines queued and not yet written (as if the child read them).
    #[cfg(test)]
    pub(crate) fn drain_lines(&self) -> Vec<String> {
        let bytes: Vec<u8> = self.queue().pending.drain(..).collect();
        String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// The supervisor's half: the pipe's writing end, fed from the queue.
pub(crate) struct InputPipe<'a> {
    input: ChildInput,
    sender: Option<pipe::Sender>,
    record: Option<&'a mut (dyn Write + Send)>,
    chunk: Vec<u8>,
    written: u64,
}

impl<'a> InputPipe<'a> {
    pub(crate) fn new(
        input: ChildInput,
        sender: pipe::Sender,
        record: Option<&'a mut (dyn Write + Send)>,
    ) -> InputPipe<'a> {
        InputPipe {
            input,
            sender: Some(sender),
            record,
            chunk: Vec::with_capacity(WRITE_CHUNK_BYTES),
            written: 0,
        }
    }

    /// Whether there is something to write, and a pipe to write it to.
    pub(crate) fn wants_write(&self) -> bool {
        self.sender.is_some() && !self.input.queue().pending.is_empty()
    }

    /// Writes what the pipe takes of the queue's head. Cancel-safe: bytes leave the queue
    /// only once written.
    pub(crate) async fn write_some(&mut self) -> std::io::Result<usize> {
        let Some(sender) = self.sender.as_mut() else {
            return Ok(0);
        };
        self.chunk.clear();
        {
            let q = self.input.queue();
            let (front, back) = q.pending.as_slices();
            let take = |s: &[u8], room: usize| s.len().min(room);
            let n = take(front, WRITE_CHUNK_BYTES);
            self.chunk.extend_from_slice(&front[..n]);
            let m = take(back, WRITE_CHUNK_BYTES - n);
            self.chunk.extend_from_slice(&back[..m]);
        }
        if self.chunk.is_empty() {
            return Ok(0);
        }
        sender.write(&self.chunk).await
    }

    /// Takes the result of [`InputPipe::write_some`]: the written bytes leave the queue
    /// (into the record); a failed pipe is closed for good.
    pub(crate) fn written(&mut self, result: std::io::Result<usize>) {
        match result {
            Ok(n) => {
                let mut q = self.input.queue();
                let n = n.min(q.pending.len());
                let bytes: Vec<u8> = q.pending.drain(..n).collect();
                drop(q);
                self.written += bytes.len() as u64;
                if let Some(record) = self.record.as_mut() {
                    if let Err(e) = record.write_all(&bytes) {
                        tracing::warn!("failed to record the child's input: {e}");
                        self.record = None;
                    }
                }
            }
            Err(e) => {
                tracing::debug!("the child's stdin is closed: {e}");
                self.gone(Some(e.to_string()));
            }
        }
        self.close_if_done();
    }

    /// Closes the pipe once a writer closed the input and everything queued is written.
    pub(crate) fn close_if_done(&mut self) {
        let q = self.input.queue();
        if q.closing && q.pending.is_empty() && self.sender.is_some() {
            drop(q);
            self.sender = None;
            if let Some(record) = self.record.as_mut() {
                let _ = record.flush();
            }
        }
    }

    /// The run is over (or the pipe broke): nothing more is written, and writers are told.
    pub(crate) fn gone(&mut self, why: Option<String>) {
        self.sender = None;
        let mut q = self.input.queue();
        q.pending.clear();
        q.gone.get_or_insert(why);
        drop(q);
        if let Some(record) = self.record.as_mut() {
            let _ = record.flush();
        }
    }

    /// Bytes written to the child so far.
    #[cfg(test)]
    pub(crate) fn bytes_written(&self) -> u64 {
        self.written
    }
}

impl Drop for InputPipe<'_> {
    fn drop(&mut self) {
        self.gone(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::os::fd::OwnedFd;

    fn pipe_pair() -> (pipe::Sender, OwnedFd) {
        let (r, w) = nix::unistd::pipe().unwrap();
        (pipe::Sender::from_owned_fd(w).unwrap(), r)
    }

    fn read_all(fd: OwnedFd) -> Vec<u8> {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut std::fs::File::from(fd), &mut out).unwrap();
        out
    }

    #[tokio::test]
    async fn lines_are_written_in_order_recorded_and_closing_ends_the_input() {
        let input = ChildInput::new();
        input.send_line(b"one").unwrap();
        input.send_json(&serde_json::json!({"two": 2})).unwrap();
        let (sender, reader) = pipe_pair();
        let mut record = Vec::new();
        let mut p = InputPipe::new(input.clone(), sender, Some(&mut record));
        while p.wants_write() {
            let r = p.write_some().await;
            p.written(r);
        }
        input.close();
        assert!(!input.is_open());
        assert_eq!(
            input.send_line(b"late"),
            Err(InputError::Closed(None)),
            "nothing after the close"
        );
        p.close_if_done();
        assert_eq!(p.bytes_written(), 14);
        drop(p);
        assert_eq!(read_all(reader), b"one\n{\"two\":2}\n");
        assert_eq!(record, b"one\n{\"two\":2}\n");
    }

    #[tokio::test]
    async fn a_child_that_reads_nothing_fills_the_queue_and_further_lines_are_refused() {
        let input = ChildInput::new();
        let line = vec![b'x'; 1024 * 1024 - 1];
        for _ in 0..16 {
            input.send_line(&line).unwrap();
        }
        assert_eq!(
            input.send_line(b"y"),
            Err(InputError::Full {
                pending: MAX_PENDING_INPUT_BYTES
            })
        );
        assert_eq!(input.pending(), MAX_PENDING_INPUT_BYTES);
    }

    #[tokio::test]
    async fn a_closed_reader_closes_the_input_and_writers_are_told_why() {
        let input = ChildInput::new();
        let (sender, reader) = pipe_pair();
        drop(reader);
        let mut p = InputPipe::new(input.clone(), sender, None);
        input.send_line(b"hello").unwrap();
        let r = p.write_some().await;
        assert!(r.is_err(), "EPIPE: {r:?}");
        p.written(r);
        assert!(!p.wants_write());
        assert!(!input.is_open());
        match input.send_line(b"again") {
            Err(InputError::Closed(Some(why))) => assert!(why.contains("Broken pipe"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_write_from_another_thread_wakes_the_pipe() {
        let input = ChildInput::new();
        let (sender, _reader) = pipe_pair();
        let p = InputPipe::new(input.clone(), sender, None);
        let writer = input.clone();
        std::thread::spawn(move || writer.send_line(b"from afar").unwrap());
        tokio::time::timeout(std::time::Duration::from_secs(20), input.queued())
            .await
            .expect("woken");
        assert!(p.wants_write());
    }
}
