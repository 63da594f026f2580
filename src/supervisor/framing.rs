//! Splits the child's stdout into lines with a maximum length, so that memory stays bounded
//! whatever the child prints. Complete lines inside a read chunk are handed out without
//! copying; only a line that straddles two reads is buffered.

/// One framed line of the child's stdout.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Frame<'a> {
    /// A line without its `\n` (and without a trailing `\r`).
    Line(&'a [u8]),
    /// A line longer than the maximum; its bytes were dropped as they arrived.
    TooLong { bytes: u64 },
}

#[derive(Debug)]
pub(super) struct LineFramer {
    max_line_bytes: usize,
    partial: Vec<u8>,
    /// Bytes of an over-long line dropped so far; `Some` while skipping to its end.
    skipping: Option<u64>,
}

impl LineFramer {
    pub(super) fn new(max_line_bytes: usize) -> Self {
        LineFramer {
            max_line_bytes,
            partial: Vec::new(),
            skipping: None,
        }
    }

    /// Feeds one chunk and calls `on_frame` for every line it completes.
    pub(super) fn push(&mut self, mut chunk: &[u8], on_frame: &mut dyn FnMut(Frame<'_>)) {
        while !chunk.is_empty() {
            let newline = memchr::memchr(b'\n', chunk);
            let (piece, rest) = match newline {
                Some(i) => (&chunk[..i], Some(&chunk[i + 1..])),
                None => (chunk, None),
            };
            if let Some(skipped) = self.skipping.as_mut() {
                *skipped += piece.len() as u64;
                if rest.is_some() {
                    let bytes = *skipped;
                    self.skipping = None;
                    on_frame(Frame::TooLong { bytes });
                }
            } else if self.partial.len() + piece.len() > self.max_line_bytes {
                let bytes = (self.partial.len() + piece.len()) as u64;
                self.partial = Vec::new();
                if rest.is_some() {
                    on_frame(Frame::TooLong { bytes });
                } else {
                    self.skipping = Some(bytes);
                }
            } else if rest.is_some() {
                if self.partial.is_empty() {
                    on_frame(Frame::Line(strip_cr(piece)));
                } else {
                    self.buffer(piece);
                    let line = std::mem::take(&mut self.partial);
                    on_frame(Frame::Line(strip_cr(&line)));
                    // Keep the allocation for the next straddling line unless it was large.
                    if line.capacity() <= 64 * 1024 {
                        self.partial = line;
                        self.partial.clear();
                    }
                }
            } else {
                self.buffer(piece);
            }
            chunk = rest.unwrap_or(&[]);
        }
    }

    /// Appends to the line being assembled. It grows as a vector does (doubling), but
    /// never past the maximum line: a line near the maximum would otherwise take twice it.
    fn buffer(&mut self, piece: &[u8]) {
        let needed = self.partial.len() + piece.len();
        if needed > self.partial.capacity() {
            let grown = (self.partial.capacity() * 2)
                .max(needed)
                .min(self.max_line_bytes.max(needed));
            self.partial.reserve_exact(grown - self.partial.len());
        }
        self.partial.extend_from_slice(piece);
    }

    /// Flushes an unterminated last line at end of stream.
    pub(super) fn finish(&mut self, on_frame: &mut dyn FnMut(Frame<'_>)) {
        if let Some(bytes) = self.skipping.take() {
            on_frame(Frame::TooLong { bytes });
        } else if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            on_frame(Frame::Line(strip_cr(&line)));
        }
    }
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[derive(Debug, PartialEq)]
    enum Owned {
        Line(String),
        TooLong(u64),
    }

    fn frame_all(max: usize, chunks: &[&[u8]]) -> Vec<Owned> {
        let mut framer = LineFramer::new(max);
        let mut out = Vec::new();
        let mut sink = |f: Frame<'_>| {
            out.push(match f {
                Frame::Line(l) => Owned::Line(String::from_utf8_lossy(l).into_owned()),
                Frame::TooLong { bytes } => Owned::TooLong(bytes),
            })
        };
        for c in chunks {
            framer.push(c, &mut sink);
        }
        framer.finish(&mut sink);
        out
    }

    #[test]
    fn splits_lines_across_chunks_and_strips_cr() {
        assert_eq!(
            frame_all(100, &[b"ab", b"c\r\nde\n", b"\nf"]),
            vec![
                Owned::Line("abc".into()),
                Owned::Line("de".into()),
                Owned::Line("".into()),
                Owned::Line("f".into()),
            ]
        );
    }

    #[test]
    fn a_line_near_the_maximum_never_takes_more_than_the_maximum() {
        let max = 1000;
        let mut framer = LineFramer::new(max);
        for _ in 0..33 {
            framer.push(&[b'x'; 30], &mut |_| panic!("no line yet"));
        }
        assert_eq!(framer.partial.len(), 990);
        assert!(
            framer.partial.capacity() <= max,
            "{}",
            framer.partial.capacity()
        );
        let mut lines = 0;
        framer.push(b"\n", &mut |f| {
            assert!(matches!(f, Frame::Line(l) if l.len() == 990));
            lines += 1;
        });
        assert_eq!(lines, 1);
    }

    #[test]
    fn over_long_lines_are_reported_and_skipped_whole() {
        assert_eq!(
            frame_all(4, &[b"ok\n12345", b"6789\nfine\n", b"abcdef\n"]),
            vec![
                Owned::Line("ok".into()),
                Owned::TooLong(9),
                Owned::Line("fine".into()),
                Owned::TooLong(6),
            ]
        );
        // Exactly at the limit is fine; an unterminated over-long tail is reported at the end.
        assert_eq!(
            frame_all(4, &[b"1234\n12", b"345"]),
            vec![Owned::Line("1234".into()), Owned::TooLong(5)]
        );
    }
}
