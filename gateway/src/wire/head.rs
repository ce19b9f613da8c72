//! Reading one request head as the client sent it: `httparse` (hyper's
//! own parser) over the raw bytes, and the body framing the head declares,
//! refusing the ambiguous ones hyper would silently normalise.

use std::fmt;
use std::mem::MaybeUninit;

use super::{Chunk, Framing};

/// Most header lines in one head; hyper's default limit too, so a head we
/// cannot parse is one hyper refuses.
const MAX_HEADERS: usize = 100;

/// Why a request head was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadFault {
    /// Both `Content-Length` and `Transfer-Encoding`.
    LengthAndChunked,
    /// More than one `Content-Length` line (even with equal values).
    Lengths(usize),
    /// More than one `Transfer-Encoding` line.
    Encodings(usize),
    /// A `Transfer-Encoding` with a coding besides `chunked` (`gzip,
    /// chunked`): the body would reach the upstream still in that coding,
    /// with nothing to say so. 501, as Go answers it.
    Coding,
    /// A well-formed version Go's server does not serve: `HTTP/major.minor`
    /// with a major version other than 1 (`HTTP/2.0` spelled as text,
    /// `HTTP/0.9`), answered 505 as Go answers it.
    Version(u8, u8),
}

impl fmt::Display for HeadFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeadFault::LengthAndChunked => {
                f.write_str("the request has both Content-Length and Transfer-Encoding")
            }
            HeadFault::Lengths(n) => write!(f, "the request has {n} Content-Length headers"),
            HeadFault::Encodings(n) => write!(f, "the request has {n} Transfer-Encoding headers"),
            HeadFault::Coding => f.write_str(
                "the request's Transfer-Encoding has a coding other than chunked, which is not implemented",
            ),
            HeadFault::Version(major, minor) => write!(
                f,
                "the request line's version HTTP/{major}.{minor} is not served (only HTTP/1.x)"
            ),
        }
    }
}

/// What a whole head tells the reader.
pub(super) struct Head {
    /// What follows the head, or why it is refused.
    pub(super) framing: Result<Framing, HeadFault>,
    /// The connection closes after the answer (HTTP/1.0 without
    /// `Connection: keep-alive`, or `Connection: close`).
    pub(super) closes: bool,
}

/// One parse of the bytes that should start with a head.
pub(super) enum Parsed {
    /// The head is `n` bytes.
    Complete(usize, Head),
    Partial,
    /// Not a head hyper would accept: it answers with an error itself.
    Invalid,
    /// A request line whose version `httparse` (so hyper) refuses: see
    /// [`version_token`].
    Version,
}

/// Where the version of a request line `httparse` refused stands, and
/// what Go's server makes of it (`http.ParseHTTPVersion`, then
/// `http1ServerSupportsRequest`): exactly `HTTP/` digit `.` digit is a
/// version; a major version of 1 is served (HTTP/1.2 as HTTP/1.1), any
/// other is answered 505; anything else is malformed (400).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum VersionToken {
    /// The line has not arrived far enough to tell.
    Partial,
    /// `HTTP/major.minor` at `at..at + 8`, followed by the line's end.
    At(usize, u8, u8),
    /// Not a version Go reads (`HTTP/1.10`, `http/1.1`, `HTTP/01.1`).
    Malformed,
}

/// The version of the request line at the start of `data`.
pub(super) fn version_token(data: &[u8]) -> VersionToken {
    // httparse's request line: method SP target SP version, single spaces.
    let mut spaces = data
        .iter()
        .enumerate()
        .take_while(|(_, &b)| b != b'\n')
        .filter(|(_, &b)| b == b' ')
        .map(|(i, _)| i);
    let (Some(_), Some(sp)) = (spaces.next(), spaces.next()) else {
        return match data.contains(&b'\n') {
            true => VersionToken::Malformed,
            false => VersionToken::Partial,
        };
    };
    let at = sp + 1;
    let token = &data[at..];
    // The eight bytes and the line end after them: `\r\n` or `\n`.
    let want = b"HTTP/0.0\r";
    for (i, &b) in token.iter().enumerate().take(want.len()) {
        let ok = match i {
            0..=4 | 6 => b == want[i],
            5 | 7 => b.is_ascii_digit(),
            _ => b == b'\r' || b == b'\n',
        };
        if !ok {
            return VersionToken::Malformed;
        }
    }
    if token.len() < want.len() {
        return VersionToken::Partial;
    }
    VersionToken::At(at, token[5] - b'0', token[7] - b'0')
}

pub(super) fn parse_head(data: &[u8]) -> Parsed {
    let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    match httparse::ParserConfig::default().parse_request_with_uninit_headers(
        &mut req,
        data,
        &mut headers,
    ) {
        Ok(httparse::Status::Complete(n)) => match head_of(req.version, req.headers) {
            Some(head) => Parsed::Complete(n, head),
            None => Parsed::Invalid,
        },
        Ok(httparse::Status::Partial) => Parsed::Partial,
        Err(httparse::Error::Version) => Parsed::Version,
        Err(_) => Parsed::Invalid,
    }
}

/// What a parsed request head declares, for the gateway's own HTTP/1
/// reader ([`crate::h1down`]): the same checks as on the byte stream.
pub enum Declared {
    /// No body, or `Content-Length: n` (`Some(n)`, n > 0).
    Plain {
        /// The body's length, when it has one.
        length: Option<u64>,
        /// The connection closes after the answer.
        closes: bool,
    },
    /// Something the own reader leaves to hyper: a chunked body, a head
    /// refused for its framing, or one hyper refuses itself.
    Other,
}

/// The framing `headers` declare (see [`Declared`]).
pub fn declared(version: Option<u8>, headers: &[httparse::Header<'_>]) -> Declared {
    match head_of(version, headers) {
        Some(Head {
            framing: Ok(Framing::Head),
            closes,
        }) => Declared::Plain {
            length: None,
            closes,
        },
        Some(Head {
            framing: Ok(Framing::Sized(n)),
            closes,
        }) => Declared::Plain {
            length: Some(n),
            closes,
        },
        _ => Declared::Other,
    }
}

/// The body framing a head declares, as hyper reads it, and whether the
/// connection ends after it; `None` for heads hyper refuses itself.
fn head_of(version: Option<u8>, headers: &[httparse::Header<'_>]) -> Option<Head> {
    let (mut lengths, mut encodings) = (0, 0);
    let mut length = None;
    let mut chunked = false;
    // Only `chunked` alone: any other coding is refused (chunked last) or
    // left to hyper, which refuses it (chunked not last).
    let mut other_coding = false;
    // HTTP/1.1 keeps the connection unless told otherwise; 1.0 closes it
    // unless asked to keep it. A `close` anywhere wins, whatever comes
    // after it, as hyper and Go's server read it (`close, keep-alive` on
    // HTTP/1.0 was kept alive here while hyper closed).
    let (mut close, mut keep_alive) = (false, false);
    for h in headers {
        // The names looked for are rare among a request's headers; their
        // lengths differ from most others', which skips the comparison.
        if h.name.len() == 10 && h.name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                if token.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    keep_alive = true;
                }
            }
        } else if h.name.len() == 14 && h.name.eq_ignore_ascii_case("content-length") {
            lengths += 1;
            length = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok());
        } else if h.name.len() == 17 && h.name.eq_ignore_ascii_case("transfer-encoding") {
            encodings += 1;
            chunked = h
                .value
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            other_coding = !h.value.trim_ascii().eq_ignore_ascii_case(b"chunked");
        }
    }
    let closes = close || (version != Some(1) && !keep_alive);
    let fault = match (lengths, encodings) {
        (1.., 1..) => Some(HeadFault::LengthAndChunked),
        (2.., _) => Some(HeadFault::Lengths(lengths)),
        (_, 2..) => Some(HeadFault::Encodings(encodings)),
        (_, 1) if chunked && other_coding => Some(HeadFault::Coding),
        _ => None,
    };
    if let Some(fault) = fault {
        return Some(Head {
            framing: Err(fault),
            closes: true,
        });
    }
    let framing = match (lengths, chunked) {
        (0, false) if encodings == 0 => Framing::Head,
        (0, true) => Framing::Chunked(Chunk::Start),
        // Transfer-Encoding not ending in chunked: hyper refuses it.
        (0, false) => return None,
        _ => match length? {
            0 => Framing::Head,
            n => Framing::Sized(n),
        },
    };
    Some(Head {
        framing: Ok(framing),
        closes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framing(head: &str) -> Result<&'static str, HeadFault> {
        match parse_head(head.as_bytes()) {
            Parsed::Complete(n, h) => {
                assert_eq!(n, head.len());
                h.framing.map(|f| match f {
                    Framing::Head => "none",
                    Framing::Sized(_) => "sized",
                    Framing::Chunked(_) => "chunked",
                    Framing::Off | Framing::BadHead => "off",
                })
            }
            Parsed::Partial => Ok("partial"),
            Parsed::Invalid => Ok("invalid"),
            Parsed::Version => Ok("version"),
        }
    }

    #[test]
    fn versions_are_found_and_read_as_go_reads_them() {
        use VersionToken::*;
        let at = "GET /a ".len();
        for (line, want) in [
            ("GET /a HTTP/1.2\r\n", At(at, 1, 2)),
            ("GET /a HTTP/2.0\n", At(at, 2, 0)),
            ("GET /a HTTP/0.9\r\nHost: a\r\n\r\n", At(at, 0, 9)),
            ("GET /a HTTP/9.9\r", At(at, 9, 9)),
            // Not whole yet.
            ("GET /a HTTP/1.2", Partial),
            ("GET /a HTTP/1", Partial),
            ("GET /a", Partial),
            ("GET", Partial),
            // Not a version Go reads.
            ("GET /a HTTP/1.10\r\n", Malformed),
            ("GET /a HTTP/01.1\r\n", Malformed),
            ("GET /a http/1.1\r\n", Malformed),
            ("GET /a HTTP/1.x\r\n", Malformed),
            ("GET /a HTTP/1,1\r\n", Malformed),
            ("GET /a b HTTP/1.1\r\n", Malformed),
            ("GET /a\r\n", Malformed),
            ("GET\r\n", Malformed),
        ] {
            assert_eq!(version_token(line.as_bytes()), want, "{line:?}");
        }
        assert_eq!(
            framing("GET / HTTP/1.2\r\nHost: a\r\n\r\n"),
            Ok("version"),
            "httparse refuses it: the reader rewrites it"
        );
    }

    #[test]
    fn heads_declare_their_framing_and_doubles_are_refused() {
        let get = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        assert_eq!(framing(get), Ok("none"));
        assert_eq!(
            framing("POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\n"),
            Ok("sized")
        );
        assert_eq!(
            framing("POST / HTTP/1.1\r\ntransfer-encoding:  Chunked \r\n\r\n"),
            Ok("chunked")
        );
        // A coding besides chunked: the body would go on still in it (501).
        for te in ["gzip, chunked", "chunked, chunked", "x-custom,chunked"] {
            assert_eq!(
                framing(&format!(
                    "POST / HTTP/1.1\r\nTransfer-Encoding: {te}\r\n\r\n"
                )),
                Err(HeadFault::Coding),
                "{te}"
            );
        }
        assert_eq!(
            framing("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"),
            Ok("invalid")
        );
        assert_eq!(
            framing("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n"),
            Err(HeadFault::Lengths(2))
        );
        assert_eq!(
            framing("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Err(HeadFault::LengthAndChunked)
        );
        assert_eq!(
            framing("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Err(HeadFault::Encodings(2))
        );
        assert_eq!(framing("GET / HTTP/1.1\r\nHost: a\r\n"), Ok("partial"));
    }
}
