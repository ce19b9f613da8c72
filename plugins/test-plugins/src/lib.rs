//! Plugins that exercise every host callback, one behaviour per symbol, so
//! the gateway's tests can check what the upstream (or the client) saw.
//! Also a tour of the SDK: each function is a small, complete middleware.

use std::sync::atomic::{AtomicU64, Ordering};

use plugin_sdk::{export_plugin, LogLevel, PluginError, Request};

/// Does nothing: isolates the cost of the call itself in benchmarks.
fn noop(_: &mut Request<'_>) -> Result<(), PluginError> {
    Ok(())
}

/// ABI 1.3: adds a header to the client's answer and sends the request
/// upstream with the method named in `X-Method` (when present).
fn client_header(req: &mut Request<'_>) -> Result<(), PluginError> {
    req.add_client_header("X-Native-Client", "from-native")?;
    req.add_client_header("X-Both", "native")?;
    if let Some(m) = req.header("x-method") {
        let m = String::from_utf8_lossy(m).into_owned();
        req.set_method(&m)?;
    }
    Ok(())
}

/// Sets, appends and deletes headers.
fn edit_headers(req: &mut Request<'_>) -> Result<(), PluginError> {
    req.set_header("X-Set", "replaced")?;
    req.append_header("X-Append", "added")?;
    req.delete_header("X-Delete")
}

/// Rewrites path, query and body, keeping the old ones in headers.
fn rewrite(req: &mut Request<'_>) -> Result<(), PluginError> {
    let old = format!("{} {:?} {}", req.path(), req.query(), req.body().len());
    req.set_header("X-Old", old)?;
    let path = format!("/rewritten{}", req.path());
    req.set_path(&path)?;
    req.set_query(Some("a=1&b=two"))?;
    req.set_body("rewritten body")
}

/// Writes a path that climbs out of the API with dot segments (and the
/// query away): the gateway must clean it before it goes upstream.
fn climb_out(req: &mut Request<'_>) -> Result<(), PluginError> {
    req.set_path("/edit/a/../../../admin/./x")?;
    req.set_query(None)
}

/// Removes the query string altogether.
fn drop_query(req: &mut Request<'_>) -> Result<(), PluginError> {
    req.set_query(None)
}

/// Reports everything it can read in one header, to check the read side.
fn read_all(req: &mut Request<'_>) -> Result<(), PluginError> {
    let multi: Vec<String> = req
        .header_values("x-multi")
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    let lines = req
        .headers()
        .filter(|(n, _)| n.starts_with("x-multi"))
        .count();
    let summary = format!(
        "method={} path={} query={} multi={} count={} lines={} body={}",
        req.method(),
        req.path(),
        req.query().unwrap_or("<none>"),
        multi.join(","),
        req.header_count("X-MULTI"),
        lines,
        String::from_utf8_lossy(req.body()),
    );
    req.set_header("X-Read", summary)
}

/// Appends the path it sees, to tell pre (unstripped) from post (stripped).
fn seen_path(req: &mut Request<'_>) -> Result<(), PluginError> {
    let path = req.path().to_string();
    req.append_header("X-Seen-Path", path)
}

/// Answers 418 itself: nothing is proxied.
fn teapot(req: &mut Request<'_>) -> Result<(), PluginError> {
    req.respond(
        418,
        &[("Content-Type", "application/json"), ("X-Short", "circuit")],
        r#"{"teapot":true}"#,
    )
}

fn fail(_: &mut Request<'_>) -> Result<(), PluginError> {
    Err(PluginError::new("deliberate failure"))
}

fn panics(_: &mut Request<'_>) -> Result<(), PluginError> {
    panic!("deliberate panic")
}

/// Sets a header value with CR/LF and ignores the refusal: the gateway must
/// still fail the request.
fn bad_header_value(req: &mut Request<'_>) -> Result<(), PluginError> {
    let _ = req.set_header("X-Injected", "a\r\nX-Evil: yes");
    Ok(())
}

/// Adds 40,000 distinct headers, ignoring every refusal, to the request
/// or, in the response phase, to the response: past what a header map
/// holds (32,768), where `http`'s `append` panics. The gateway must refuse
/// the edit and fail the request, and refuse the rest at once.
fn header_flood(req: &mut Request<'_>) -> Result<(), PluginError> {
    let response = req.response_status().is_some();
    for i in 0..40_000 {
        let name = format!("x-flood-{i}");
        let _ = match response {
            true => req.append_response_header(&name, "1"),
            false => req.append_header(&name, "1"),
        };
    }
    Ok(())
}

/// Sets a header with an empty name, ignoring the refusal.
fn empty_header_name(req: &mut Request<'_>) -> Result<(), PluginError> {
    let _ = req.append_header("", "value");
    Ok(())
}

/// Answers with a header value containing a newline, ignoring the refusal.
fn bad_response_header(req: &mut Request<'_>) -> Result<(), PluginError> {
    let _ = req.respond(200, &[("X-Bad", "line\nbreak")], "x");
    Ok(())
}

/// Fails or panics only when asked to (`X-Trigger: fail|panic`), so a test
/// can show the very next request through the same plugin succeeds.
fn moody(req: &mut Request<'_>) -> Result<(), PluginError> {
    match req.header("X-Trigger") {
        Some(b"fail") => Err(PluginError::new("asked to fail")),
        Some(b"panic") => panic!("asked to panic"),
        _ => req.set_header("X-Survived", "yes"),
    }
}

/// Sets a path that is not a path, ignoring the refusal.
fn bad_path(req: &mut Request<'_>) -> Result<(), PluginError> {
    let _ = req.set_path("no-leading-slash");
    Ok(())
}

/// Answers with a status no client can be sent, ignoring the refusal.
fn bad_status(req: &mut Request<'_>) -> Result<(), PluginError> {
    let _ = req.respond(99, &[], "x");
    Ok(())
}

/// Reads what ABI 1.1 added (api_id, config_data, the call budget) into
/// headers, and logs through the gateway.
fn api_info(req: &mut Request<'_>) -> Result<(), PluginError> {
    let id = req.api_id().ok_or("host older than ABI 1.1")?.to_string();
    let config = req
        .config_data()
        .ok_or("host older than ABI 1.1")?
        .to_string();
    let budget = req.call_budget().ok_or("host older than ABI 1.1")?;
    req.log(LogLevel::Info, &format!("ApiInfo ran for {id}"));
    req.set_header("X-Api-Id", id)?;
    req.set_header("X-Config", config)?;
    req.set_header("X-Budget-Ms", budget.as_millis().to_string())
}

/// Logs the request's body through the gateway, whatever it holds (line
/// breaks, megabytes): the gateway's log line is the bound on it.
fn log_body(req: &mut Request<'_>) -> Result<(), PluginError> {
    let body = String::from_utf8_lossy(req.body()).into_owned();
    req.log(LogLevel::Info, &format!("LogBody: {body}"));
    Ok(())
}

static CALLS: AtomicU64 = AtomicU64::new(0);

/// Counts calls in a process-wide static: APIs sharing this library share it.
fn count(req: &mut Request<'_>) -> Result<(), PluginError> {
    let n = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
    req.set_header("X-Count", n.to_string())
}

/// A response entry (ABI 1.2): reads the upstream's answer and the request
/// that went upstream, rewrites the body, swaps headers, and sets the
/// status the request asks for in `X-Want-Status`.
fn stamp_response(req: &mut Request<'_>) -> Result<(), PluginError> {
    let status = req.response_status().ok_or("not in the response phase")?;
    let upstream = req
        .response_header("x-upstream")
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .unwrap_or_default();
    let lines = req.response_headers().count();
    let seen = format!(
        "status={status} upstream={upstream} path={} lines>0={}",
        req.path(),
        lines > 0
    );
    let body = format!(
        "native saw: {}",
        String::from_utf8_lossy(req.response_body())
    );
    let want = req
        .header("x-want-status")
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.parse::<u16>().ok());
    req.set_response_header("X-Native-Response", seen)?;
    req.append_response_header("X-Native-Append", "one")?;
    req.delete_response_header("X-Upstream")?;
    req.set_response_body(body)?;
    if let Some(code) = want {
        req.set_response_status(code)?;
    }
    Ok(())
}

/// A response entry that tries to edit the request (already sent): the
/// host refuses, and the client gets 500 though the error is ignored.
fn edit_request_late(req: &mut Request<'_>) -> Result<(), PluginError> {
    let _ = req.set_header("X-Too-Late", "yes");
    Ok(())
}

/// Reports the request's framing headers as the previous middleware left
/// them (`X-Framing: cl=.. te=..`), to compare drivers' body edits.
fn framing(req: &mut Request<'_>) -> Result<(), PluginError> {
    let all = |name: &str| -> String {
        req.header_values(name)
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect::<Vec<_>>()
            .join(",")
    };
    let seen = format!(
        "cl={} te={}",
        all("content-length"),
        all("transfer-encoding")
    );
    req.set_header("X-Framing", seen)
}

export_plugin!(
    ClientHeader => client_header,
    Framing => framing,
    StampResponse => stamp_response,
    EditRequestLate => edit_request_late,
    Noop => noop,
    EditHeaders => edit_headers,
    LogBody => log_body,
    Rewrite => rewrite,
    DropQuery => drop_query,
    ClimbOut => climb_out,
    ReadAll => read_all,
    SeenPath => seen_path,
    Teapot => teapot,
    Fail => fail,
    Panic => panics,
    BadHeaderValue => bad_header_value,
    EmptyHeaderName => empty_header_name,
    HeaderFlood => header_flood,
    BadResponseHeader => bad_response_header,
    Count => count,
    Moody => moody,
    BadPath => bad_path,
    BadStatus => bad_status,
    ApiInfo => api_info,
);
