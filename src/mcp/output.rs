//! What the server writes to the client: rmcp's messages, and orchestrate's own answers to
//! lines rmcp never saw ([`super::input`]), each a whole line, never one inside another.
//! rmcp writes into a pipe that a task copies to stdout line by line; an answer goes out
//! between two of rmcp's lines, and at once when rmcp is writing nothing.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Bytes rmcp may write ahead of the copy to stdout.
const PIPE_BYTES: usize = 64 * 1024;
/// Error answers waiting to be written; a client that floods garbage and reads nothing
/// back cannot grow the queue past this.
const MAX_WAITING_ANSWERS: usize = 256;
/// How long the end of the session waits for the last lines to reach stdout.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// The task that writes to the client; [`Output::finish`] waits for its last lines.
pub(crate) struct Output {
    copy: JoinHandle<()>,
}

/// The writer rmcp is given and the sender of answers, both written to `out` (by a task,
/// until rmcp's writer is dropped: a pipe end whose drop is the reader's end of file).
pub(crate) fn split<W: AsyncWrite + Unpin + Send + 'static>(
    out: W,
) -> (DuplexStream, mpsc::Sender<String>, Output) {
    let (rmcp, read) = tokio::io::duplex(PIPE_BYTES);
    let (answers, waiting) = mpsc::channel(MAX_WAITING_ANSWERS);
    let copy = tokio::spawn(copy_lines(read, waiting, out));
    (rmcp, answers, Output { copy })
}

impl Output {
    /// Waits (bounded) until everything written has reached the client: once rmcp's
    /// writer is gone (queued answers still go out).
    pub(crate) async fn finish(self) {
        if tokio::time::timeout(FLUSH_WAIT, self.copy).await.is_err() {
            tracing::warn!(
                "the last messages to the client were not written within {FLUSH_WAIT:?}"
            );
        }
    }
}

async fn copy_lines<W: AsyncWrite + Unpin>(
    read: DuplexStream,
    mut waiting: mpsc::Receiver<String>,
    mut out: W,
) {
    let mut from_rmcp = BufReader::new(read);
    // rmcp's line in progress (read_until keeps what it read so far here, however its
    // future ends), and the answers that came while it was.
    let mut line = Vec::new();
    let mut held: VecDeque<String> = VecDeque::new();
    let mut rmcp_open = true;
    let mut answers_open = true;
    loop {
        tokio::select! {
            read = from_rmcp.read_until(b'\n', &mut line), if rmcp_open => {
                match read {
                    Ok(0) | Err(_) => {
                        rmcp_open = false;
                        // Once rmcp is done, only answers already queued still go out.
                        waiting.close();
                    }
                    Ok(_) => {}
                }
                if line.ends_with(b"\n") || !rmcp_open {
                    if write(&mut out, &line).await.is_err() {
                        return;
                    }
                    line.clear();
                    while let Some(answer) = held.pop_front() {
                        if write_line(&mut out, answer).await.is_err() {
                            return;
                        }
                    }
                }
            }
            answer = waiting.recv(), if answers_open && held.len() < MAX_WAITING_ANSWERS => {
                match answer {
                    Some(answer) if line.is_empty() => {
                        if write_line(&mut out, answer).await.is_err() {
                            return;
                        }
                    }
                    Some(answer) => held.push_back(answer),
                    None => answers_open = false,
                }
            }
            else => break,
        }
    }
}

async fn write_line<W: AsyncWrite + Unpin>(out: &mut W, mut line: String) -> std::io::Result<()> {
    line.push('\n');
    write(out, line.as_bytes()).await
}

async fn write<W: AsyncWrite + Unpin>(out: &mut W, bytes: &[u8]) -> std::io::Result<()> {
    out.write_all(bytes).await?;
    out.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn answers_go_between_whole_lines_and_everything_is_written() {
        let (client, server) = tokio::io::duplex(1 << 16);
        let (mut rmcp, answers, output) = split(server);
        // Half a line: the answer waits for its end.
        rmcp.write_all(b"{\"a\":").await.unwrap();
        rmcp.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        answers.send("{\"error\":1}".into()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        rmcp.write_all(b"1}\n{\"b\":2}\n").await.unwrap();
        rmcp.flush().await.unwrap();
        // Nothing written by rmcp now: the answer still goes out.
        tokio::time::sleep(Duration::from_millis(50)).await;
        answers.send("{\"error\":2}".into()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(rmcp);
        drop(answers);
        output.finish().await;
        let mut client = client;
        let mut got = String::new();
        client.read_to_string(&mut got).await.unwrap();
        let lines: Vec<&str> = got.lines().collect();
        assert_eq!(lines[0], "{\"a\":1}");
        assert!(lines.contains(&"{\"error\":1}"), "{got}");
        assert!(lines.contains(&"{\"error\":2}"), "{got}");
        assert!(lines.contains(&"{\"b\":2}"), "{got}");
        assert_eq!(lines.len(), 4, "{got}");
    }
}
