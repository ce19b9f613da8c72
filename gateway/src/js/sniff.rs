//! Go's `http.DetectContentType`: the `Content-Type` Go's HTTP server gives
//! a response whose handler set none. Tyk writes JS-forced responses
//! (`ReturnOverrides`, virtual endpoints) through Go's server, so a script
//! that sets no `Content-Type` gets this one; we reproduce it.
//!
//! The algorithm is the WHATWG MIME sniffing standard as Go implements it
//! (`net/http/sniff.go`): at most the first 512 bytes are read, leading
//! whitespace is skipped for the HTML and XML patterns, the signatures are
//! tried in order, and text without binary bytes is `text/plain`.

/// Bytes Go looks at.
const SNIFF_LEN: usize = 512;

const HTML: &str = "text/html; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

/// One of Go's signatures.
enum Sig {
    /// `<TAG` followed by a space or `>`, case-insensitively, after
    /// leading whitespace.
    Html(&'static [u8]),
    /// `pattern[i] == data[i] & mask[i]` for every `i`; `skip_ws` skips
    /// leading whitespace first.
    Masked {
        mask: &'static [u8],
        pat: &'static [u8],
        skip_ws: bool,
        ct: &'static str,
    },
    /// The data starts with these bytes.
    Exact(&'static [u8], &'static str),
    /// An ISO base media file with an `mp4` brand.
    Mp4,
    /// No binary bytes after the leading whitespace.
    Text,
}

const fn masked(mask: &'static [u8], pat: &'static [u8], ct: &'static str) -> Sig {
    Sig::Masked {
        mask,
        pat,
        skip_ws: false,
        ct,
    }
}

/// Go's `sniffSignatures`, in Go's order.
const SIGNATURES: &[Sig] = &[
    Sig::Html(b"<!DOCTYPE HTML"),
    Sig::Html(b"<HTML"),
    Sig::Html(b"<HEAD"),
    Sig::Html(b"<SCRIPT"),
    Sig::Html(b"<IFRAME"),
    Sig::Html(b"<H1"),
    Sig::Html(b"<DIV"),
    Sig::Html(b"<FONT"),
    Sig::Html(b"<TABLE"),
    Sig::Html(b"<A"),
    Sig::Html(b"<STYLE"),
    Sig::Html(b"<TITLE"),
    Sig::Html(b"<B"),
    Sig::Html(b"<BODY"),
    Sig::Html(b"<BR"),
    Sig::Html(b"<P"),
    Sig::Html(b"<!--"),
    Sig::Masked {
        mask: b"\xFF\xFF\xFF\xFF\xFF",
        pat: b"<?xml",
        skip_ws: true,
        ct: "text/xml; charset=utf-8",
    },
    Sig::Exact(b"%PDF-", "application/pdf"),
    Sig::Exact(b"%!PS-Adobe-", "application/postscript"),
    // UTF byte order marks.
    masked(
        b"\xFF\xFF\x00\x00",
        b"\xFE\xFF\x00\x00",
        "text/plain; charset=utf-16be",
    ),
    masked(
        b"\xFF\xFF\x00\x00",
        b"\xFF\xFE\x00\x00",
        "text/plain; charset=utf-16le",
    ),
    masked(b"\xFF\xFF\xFF\x00", b"\xEF\xBB\xBF\x00", TEXT),
    // Images.
    Sig::Exact(b"\x00\x00\x01\x00", "image/x-icon"),
    Sig::Exact(b"\x00\x00\x02\x00", "image/x-icon"),
    Sig::Exact(b"BM", "image/bmp"),
    Sig::Exact(b"GIF87a", "image/gif"),
    Sig::Exact(b"GIF89a", "image/gif"),
    masked(
        b"\xFF\xFF\xFF\xFF\x00\x00\x00\x00\xFF\xFF\xFF\xFF\xFF\xFF",
        b"RIFF\x00\x00\x00\x00WEBPVP",
        "image/webp",
    ),
    Sig::Exact(b"\x89PNG\x0D\x0A\x1A\x0A", "image/png"),
    Sig::Exact(b"\xFF\xD8\xFF", "image/jpeg"),
    // Audio and video.
    masked(b"\xFF\xFF\xFF\xFF", b".snd", "audio/basic"),
    masked(
        b"\xFF\xFF\xFF\xFF\x00\x00\x00\x00\xFF\xFF\xFF\xFF",
        b"FORM\x00\x00\x00\x00AIFF",
        "audio/aiff",
    ),
    masked(b"\xFF\xFF\xFF", b"ID3", "audio/mpeg"),
    masked(b"\xFF\xFF\xFF\xFF\xFF", b"OggS\x00", "application/ogg"),
    masked(
        b"\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF",
        b"MThd\x00\x00\x00\x06",
        "audio/midi",
    ),
    masked(
        b"\xFF\xFF\xFF\xFF\x00\x00\x00\x00\xFF\xFF\xFF\xFF",
        b"RIFF\x00\x00\x00\x00AVI ",
        "video/avi",
    ),
    masked(
        b"\xFF\xFF\xFF\xFF\x00\x00\x00\x00\xFF\xFF\xFF\xFF",
        b"RIFF\x00\x00\x00\x00WAVE",
        "audio/wave",
    ),
    Sig::Mp4,
    Sig::Exact(b"\x1A\x45\xDF\xA3", "video/webm"),
    // Fonts: 34 bytes of anything, then "LP".
    masked(
        b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xFF\xFF",
        b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00LP",
        "application/vnd.ms-fontobject",
    ),
    Sig::Exact(b"\x00\x01\x00\x00", "font/ttf"),
    Sig::Exact(b"OTTO", "font/otf"),
    Sig::Exact(b"ttcf", "font/collection"),
    Sig::Exact(b"wOFF", "font/woff"),
    Sig::Exact(b"wOF2", "font/woff2"),
    // Archives.
    Sig::Exact(b"\x1F\x8B\x08", "application/x-gzip"),
    Sig::Exact(b"PK\x03\x04", "application/zip"),
    Sig::Exact(b"Rar!\x1A\x07\x00", "application/x-rar-compressed"),
    Sig::Exact(b"Rar!\x1A\x07\x01\x00", "application/x-rar-compressed"),
    Sig::Exact(b"\x00\x61\x73\x6D", "application/wasm"),
    Sig::Text,
];

/// The content type Go's `http.DetectContentType` gives `data`.
pub(crate) fn detect(data: &[u8]) -> &'static str {
    let data = &data[..data.len().min(SNIFF_LEN)];
    let ws = data.iter().take_while(|b| is_ws(**b)).count();
    SIGNATURES
        .iter()
        .find_map(|sig| sig.matches(data, ws))
        .unwrap_or("application/octet-stream")
}

fn is_ws(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ')
}

impl Sig {
    fn matches(&self, data: &[u8], ws: usize) -> Option<&'static str> {
        match self {
            Sig::Html(tag) => {
                let d = &data[ws..];
                let fits = d.len() > tag.len()
                    && tag.iter().zip(d).all(|(t, b)| {
                        // Letters of the pattern match either case.
                        let b = if t.is_ascii_uppercase() { b & 0xDF } else { *b };
                        *t == b
                    })
                    && matches!(d[tag.len()], b' ' | b'>');
                fits.then_some(HTML)
            }
            Sig::Masked {
                mask,
                pat,
                skip_ws,
                ct,
            } => {
                let d = if *skip_ws { &data[ws..] } else { data };
                let fits = d.len() >= pat.len()
                    && pat.iter().zip(*mask).zip(d).all(|((p, m), b)| b & m == *p);
                fits.then_some(*ct)
            }
            Sig::Exact(sig, ct) => data.starts_with(sig).then_some(*ct),
            Sig::Mp4 => is_mp4(data).then_some("video/mp4"),
            Sig::Text => {
                let binary = data[ws..].iter().any(|&b| {
                    b <= 0x08
                        || b == 0x0B
                        || (0x0E..=0x1A).contains(&b)
                        || (0x1C..=0x1F).contains(&b)
                });
                (!binary).then_some(TEXT)
            }
        }
    }
}

/// Go's `mp4Sig`: an `ftyp` box whose major or compatible brands include
/// one starting `mp4`.
fn is_mp4(data: &[u8]) -> bool {
    if data.len() < 12 {
        return false;
    }
    let size = u32::from_be_bytes([data[0], data[1], data[2], data[3]]) as usize;
    if data.len() < size || !size.is_multiple_of(4) || &data[4..8] != b"ftyp" {
        return false;
    }
    // Brands from byte 8, skipping the minor version at 12.
    (8..size)
        .step_by(4)
        .filter(|&st| st != 12)
        .any(|st| data.get(st..st + 3) == Some(b"mp4"))
}

#[cfg(test)]
mod tests {
    use super::detect;

    /// What Go detects (cases of its `sniff_test.go`, and a JSON body).
    #[test]
    fn types_are_what_go_detects() {
        for (data, want) in [
            (&b""[..], "text/plain; charset=utf-8"),
            (b"\x01\x02\x03", "application/octet-stream"),
            (b"Hello, world!", "text/plain; charset=utf-8"),
            (b"{\"ok\":true}", "text/plain; charset=utf-8"),
            (
                b"<HtMl><bOdY>blah blah blah</body></html>",
                "text/html; charset=utf-8",
            ),
            (b"\n<html>blah", "text/html; charset=utf-8"),
            (b"<html", "text/plain; charset=utf-8"),
            (b"<html>", "text/html; charset=utf-8"),
            (b"<!-- x -->", "text/html; charset=utf-8"),
            (b"\n <?xml!", "text/xml; charset=utf-8"),
            (b"%PDF-1.4", "application/pdf"),
            (b"GIF89a...", "image/gif"),
            (b"\x89PNG\x0D\x0A\x1A\x0A", "image/png"),
            (b"\xFF\xD8\xFF", "image/jpeg"),
            (b"\x1F\x8B\x08", "application/x-gzip"),
            (
                b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom",
                "video/mp4",
            ),
            (b"\xEF\xBB\xBF\x00", "text/plain; charset=utf-8"),
        ] {
            assert_eq!(detect(data), want, "{:?}", String::from_utf8_lossy(data));
        }
    }
}
