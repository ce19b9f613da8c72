//! ab's `-v N`: troubleshooting lines printed while the run goes.
//!
//! ab's manual gives the levels: 2 and above prints warnings and info, 3
//! and above response codes, 4 and above headers. loadgen prints the same
//! lines in ab's words (`INFO: GET header == ...`, `WARNING: Response code
//! not 2xx (404)`, `LOG: Response code = 200`, `LOG: header received:`).
//! ab 2.3's code prints the received headers from level 2 on, against its
//! own manual; loadgen keeps to the manual, so that `-v 2` stays readable
//! over thousands of requests.
//!
//! Lines go to stdout as ab's do (failures to stderr); every message is
//! written in one call under the stdout lock, so lines from different load
//! threads never interleave. At the default level nothing here runs but a
//! comparison per request.

use std::io::Write;

use crate::http1::{Failure, Response};

/// Level at which warnings and the request sent are printed.
pub const WARNINGS: u8 = 2;
/// Level at which every response code is printed.
pub const CODES: u8 = 3;
/// Level at which every response head is printed.
pub const HEADS: u8 = 4;

/// ab's line before the run: the request it sends, head only.
pub fn request_info(level: u8, request: &[u8]) -> Option<String> {
    if level < WARNINGS {
        return None;
    }
    let text = String::from_utf8_lossy(request);
    let head = text.split("\r\n\r\n").next().unwrap_or("");
    let method = head.split(' ').next().unwrap_or("");
    Some(format!(
        "INFO: {method} header == \n---\n{head}\r\n\r\n\n---\n"
    ))
}

/// What ab prints for one response at `level`, empty when nothing.
pub fn response_lines(level: u8, resp: &Response) -> String {
    let mut out = String::new();
    if level >= HEADS {
        if let Some(head) = &resp.head {
            out.push_str(&format!("LOG: header received:\n{head}\n"));
        }
    }
    if !(200..300).contains(&resp.status) {
        if level >= WARNINGS {
            out.push_str(&format!(
                "WARNING: Response code not 2xx ({})\n",
                resp.status
            ));
        }
    } else if level >= CODES {
        out.push_str(&format!("LOG: Response code = {}\n", resp.status));
    }
    out
}

/// Prints one response's lines (nothing below level 2).
pub fn response(level: u8, resp: &Response) {
    if level < WARNINGS {
        return;
    }
    let lines = response_lines(level, resp);
    if !lines.is_empty() {
        // A closed stdout is not this line's problem: the report will find it.
        let _ = std::io::stdout().lock().write_all(lines.as_bytes());
    }
}

/// Prints a failed request (level 2 and above), to stderr.
pub fn failure(level: u8, f: &Failure) {
    if level < WARNINGS {
        return;
    }
    let why = match f {
        Failure::Connect(e) => format!("connect: {e}"),
        Failure::Receive(m) => format!("receive: {m}"),
        Failure::Exception(m) => m.clone(),
    };
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("WARNING: request failed: {why}\n").as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(status: u16) -> Response {
        Response {
            status,
            head: Some("HTTP/1.1 200 OK\r\nServer: s\r\n\r\n".into()),
            ..Response::default()
        }
    }

    #[test]
    fn each_level_adds_abs_lines() {
        assert_eq!(response_lines(1, &resp(404)), "");
        assert_eq!(
            response_lines(2, &resp(404)),
            "WARNING: Response code not 2xx (404)\n"
        );
        assert_eq!(response_lines(2, &resp(200)), "");
        assert_eq!(response_lines(3, &resp(200)), "LOG: Response code = 200\n");
        let four = response_lines(4, &resp(200));
        assert!(
            four.starts_with("LOG: header received:\nHTTP/1.1 200 OK\r\nServer: s")
                && four.ends_with("LOG: Response code = 200\n"),
            "{four:?}"
        );
        let info = request_info(2, b"GET / HTTP/1.0\r\nHost: h\r\n\r\nbody").unwrap();
        assert!(info.starts_with("INFO: GET header == \n---\nGET / HTTP/1.0\r\nHost: h"));
        assert!(!info.contains("body") && info.ends_with("\n---\n"));
        assert!(request_info(1, b"GET / HTTP/1.0\r\n\r\n").is_none());
    }
}
