//! The host side of the proxy-wasm ABI: the functions a module imports from
//! `env`, and the per-store state they work on.
//!
//! Every function follows the ABI's conventions: arguments are 32-bit
//! offsets and lengths into the module's memory, the result is a status
//! code, and data handed back to the module is copied into memory the
//! module allocates itself (its exported `malloc` / `proxy_on_memory_allocate`),
//! whose address and length are written to the two out-pointers it passed.
//! A pointer outside the module's memory is `InvalidMemoryAccess`, never a
//! host fault.
//!
//! What request-header middleware needs is implemented: the request header
//! map (pseudo-headers included, see `request.rs`), the request body, local
//! responses, logging, time, properties and the configuration buffers. Every
//! other ABI function is defined too, so a module that merely links it still
//! loads, and returns `Unimplemented`; the first call of each is logged.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use wasmtime::{Caller, Global, Linker, Memory, TypedFunc, Val, ValType};

use super::abi;
use super::limits::InstanceLimits;
use super::request::{body_within, HeaderLimit, ReqParts, MAX_HEADERS};
use crate::middleware::MwResponse;

/// What a module may learn about where it runs, fixed at load.
#[derive(Debug)]
pub struct PluginInfo {
    /// The entry's `name`: `plugin_name` and `plugin_root_id`.
    pub name: String,
    /// The API's `api_id`, for logs.
    pub api_id: String,
    /// The module's file as the definition names it, for logs.
    pub file: std::path::PathBuf,
    /// The API's `config_data` as the configuration buffers hand it out:
    /// a JSON string's text, any other value as JSON, `None` when absent.
    pub config: Option<Vec<u8>>,
}

/// Everything host functions touch, owned by one store (one instance).
pub struct HostState {
    /// The request being handled; empty between calls.
    pub req: ReqParts,
    /// The client's address, for the `source.address` property.
    pub remote: SocketAddr,
    /// Set by `proxy_send_local_response`: answer with this, do not proxy.
    pub response: Option<MwResponse>,
    /// The module's exported memory, looked up once after instantiation.
    pub memory: Option<Memory>,
    /// The module's allocator, for data the host hands back.
    pub malloc: Option<TypedFunc<u32, u32>>,
    /// The lifecycle module's `body_to_send` global, when the plugin has a
    /// body phase (see [`sync_body_to_send`]).
    pub body_to_send: Option<Global>,
    pub plugin: Arc<PluginInfo>,
    /// The per-instance memory limit, memories and tables together (see
    /// `limits.rs`).
    pub limits: InstanceLimits,
}

impl HostState {
    /// A state for `plugin`, between calls, with at most `memory` bytes of
    /// linear memory.
    pub fn new(plugin: Arc<PluginInfo>, memory: usize) -> HostState {
        HostState {
            req: ReqParts::default(),
            remote: SocketAddr::from(([0, 0, 0, 0], 0)),
            response: None,
            memory: None,
            malloc: None,
            body_to_send: None,
            plugin,
            limits: InstanceLimits::new(memory),
        }
    }

    /// A state with no plugin, for listing the linker's definitions.
    pub fn idle() -> HostState {
        let plugin = PluginInfo {
            name: String::new(),
            api_id: String::new(),
            file: Default::default(),
            config: None,
        };
        HostState::new(Arc::new(plugin), 0)
    }
}

type Ctx<'a> = Caller<'a, HostState>;

/// The module's memory and the host state, borrowed together.
fn split<'a>(caller: &'a mut Ctx<'_>) -> Option<(&'a mut [u8], &'a mut HostState)> {
    let memory = caller.data().memory?;
    Some(memory.data_and_store_mut(caller))
}

fn slice(mem: &[u8], ptr: u32, len: u32) -> Option<&[u8]> {
    mem.get(ptr as usize..(ptr as usize).checked_add(len as usize)?)
}

fn write_u32(mem: &mut [u8], at: u32, v: u32) -> Option<()> {
    let at = at as usize;
    mem.get_mut(at..at.checked_add(4)?)?
        .copy_from_slice(&v.to_le_bytes());
    Some(())
}

/// Copies `bytes` into memory the module allocates and writes its address
/// and length to `ret_ptr` / `ret_len`. Empty data is handed back as a null
/// pointer (the SDKs read that as "empty" without an allocation).
fn give(caller: &mut Ctx<'_>, bytes: &[u8], ret_ptr: u32, ret_len: u32) -> wasmtime::Result<u32> {
    let addr = if bytes.is_empty() {
        0
    } else {
        let Some(malloc) = caller.data().malloc.clone() else {
            return Ok(abi::UNIMPLEMENTED);
        };
        malloc.call(&mut *caller, bytes.len() as u32)?
    };
    let Some((mem, _)) = split(caller) else {
        return Ok(abi::INVALID_MEMORY_ACCESS);
    };
    let copied = bytes.is_empty()
        || (|| {
            let at = addr as usize;
            mem.get_mut(at..at.checked_add(bytes.len())?)?
                .copy_from_slice(bytes);
            Some(())
        })()
        .is_some();
    if !copied
        || write_u32(mem, ret_ptr, addr).is_none()
        || write_u32(mem, ret_len, bytes.len() as u32).is_none()
    {
        return Ok(abi::INVALID_MEMORY_ACCESS);
    }
    Ok(abi::OK)
}

/// Defines every `env` function of the ABI in `linker`.
pub fn define(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    define_headers(linker)?;
    define_buffers(linker)?;
    define_misc(linker)?;
    define_unimplemented(linker)
}

fn define_headers(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        "env",
        "proxy_get_header_map_value",
        |mut c: Ctx<'_>, map: u32, kp: u32, kl: u32, rp: u32, rl: u32| {
            if map != abi::MAP_HTTP_REQUEST_HEADERS {
                return Ok(unimplemented(
                    &c.data().plugin,
                    "proxy_get_header_map_value (not request headers)",
                ));
            }
            let value = match split(&mut c) {
                Some((mem, st)) => match slice(mem, kp, kl) {
                    Some(key) => st.req.get(key),
                    None => return Ok(abi::INVALID_MEMORY_ACCESS),
                },
                None => return Ok(abi::INVALID_MEMORY_ACCESS),
            };
            match value {
                Some(v) => give(&mut c, &v, rp, rl),
                None => Ok(abi::NOT_FOUND),
            }
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_get_header_map_pairs",
        |mut c: Ctx<'_>, map: u32, rp: u32, rl: u32| {
            if map != abi::MAP_HTTP_REQUEST_HEADERS {
                return Ok(unimplemented(
                    &c.data().plugin,
                    "proxy_get_header_map_pairs (not request headers)",
                ));
            }
            let bytes = c.data().req.serialize();
            give(&mut c, &bytes, rp, rl)
        },
    )?;
    for (name, add) in [
        ("proxy_add_header_map_value", true),
        ("proxy_replace_header_map_value", false),
    ] {
        linker.func_wrap(
            "env",
            name,
            move |mut c: Ctx<'_>, map: u32, kp: u32, kl: u32, vp: u32, vl: u32| {
                if map != abi::MAP_HTTP_REQUEST_HEADERS {
                    return Ok(unimplemented(&c.data().plugin, name));
                }
                let Some((mem, st)) = split(&mut c) else {
                    return Ok(abi::INVALID_MEMORY_ACCESS);
                };
                // Past a header bound the call traps (`HeaderLimit`).
                match (slice(mem, kp, kl), slice(mem, vp, vl)) {
                    (Some(k), Some(v)) => Ok(st.req.set(k, v, add)?),
                    _ => Ok(abi::INVALID_MEMORY_ACCESS),
                }
            },
        )?;
    }
    define_header_removal(linker)
}

/// The calls that take headers away: remove one, or replace the whole map.
fn define_header_removal(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        "env",
        "proxy_remove_header_map_value",
        |mut c: Ctx<'_>, map: u32, kp: u32, kl: u32| {
            if map != abi::MAP_HTTP_REQUEST_HEADERS {
                return unimplemented(
                    &c.data().plugin,
                    "proxy_remove_header_map_value (not request headers)",
                );
            }
            let Some((mem, st)) = split(&mut c) else {
                return abi::INVALID_MEMORY_ACCESS;
            };
            match slice(mem, kp, kl) {
                Some(k) => st.req.remove(k),
                None => abi::INVALID_MEMORY_ACCESS,
            }
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_set_header_map_pairs",
        |mut c: Ctx<'_>, map: u32, p: u32, l: u32| {
            if map != abi::MAP_HTTP_REQUEST_HEADERS {
                return Ok(unimplemented(
                    &c.data().plugin,
                    "proxy_set_header_map_pairs (not request headers)",
                ));
            }
            let Some((mem, st)) = split(&mut c) else {
                return Ok(abi::INVALID_MEMORY_ACCESS);
            };
            match slice(mem, p, l).map(abi::deserialize_map) {
                Some(Some(pairs)) => Ok(st.req.replace_all(&pairs)?),
                Some(None) => Ok(abi::BAD_ARGUMENT),
                None => Ok(abi::INVALID_MEMORY_ACCESS),
            }
        },
    )?;
    Ok(())
}

fn define_buffers(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        "env",
        "proxy_get_buffer_bytes",
        |mut c: Ctx<'_>, kind: u32, start: u32, max: u32, rp: u32, rl: u32| {
            let whole: Bytes = match kind {
                abi::BUFFER_HTTP_REQUEST_BODY => c.data().req.body.clone(),
                abi::BUFFER_VM_CONFIGURATION | abi::BUFFER_PLUGIN_CONFIGURATION => {
                    match &c.data().plugin.config {
                        Some(cfg) => Bytes::copy_from_slice(cfg),
                        None => return Ok(abi::NOT_FOUND),
                    }
                }
                _ => {
                    return Ok(unimplemented(
                        &c.data().plugin,
                        "proxy_get_buffer_bytes (this buffer type)",
                    ))
                }
            };
            let from = (start as usize).min(whole.len());
            let to = from.saturating_add(max as usize).min(whole.len());
            give(&mut c, &whole[from..to], rp, rl)
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_set_buffer_bytes",
        |mut c: Ctx<'_>, kind: u32, start: u32, size: u32, p: u32, l: u32| {
            if kind != abi::BUFFER_HTTP_REQUEST_BODY {
                return Ok(unimplemented(
                    &c.data().plugin,
                    "proxy_set_buffer_bytes (not the request body)",
                ));
            }
            let Some((mem, st)) = split(&mut c) else {
                return Ok(abi::INVALID_MEMORY_ACCESS);
            };
            // Past the body bound the call traps (`BodyTooLarge`).
            let status = match slice(mem, p, l) {
                Some(data) => st.req.splice_body(start as usize, size as usize, data)?,
                None => abi::INVALID_MEMORY_ACCESS,
            };
            sync_body_to_send(&mut c)?;
            Ok(status)
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_send_local_response",
        |mut c: Ctx<'_>,
         status: u32,
         _details_ptr: u32,
         _details_len: u32,
         bp: u32,
         bl: u32,
         hp: u32,
         hl: u32,
         _grpc: i32| {
            let Some((mem, st)) = split(&mut c) else {
                return Ok(abi::INVALID_MEMORY_ACCESS);
            };
            let (Some(body), Some(headers)) = (slice(mem, bp, bl), slice(mem, hp, hl)) else {
                return Ok(abi::INVALID_MEMORY_ACCESS);
            };
            // Past the body bound the call traps, before the body is copied.
            body_within(body.len(), "proxy_send_local_response")?;
            let Some(resp) = local_response(status, body, headers)? else {
                return Ok(abi::BAD_ARGUMENT);
            };
            st.response = Some(resp);
            sync_body_to_send(&mut c)?;
            Ok(abi::OK)
        },
    )?;
    Ok(())
}

/// Keeps the lifecycle module's `body_to_send` global (`module::lifecycle`)
/// equal to what `proxy_on_request_body` would be given now: the body's
/// length, 0 once a local response was sent. Called by the only two host
/// functions that change either, so the per-request path needs no host call
/// to ask.
fn sync_body_to_send(c: &mut Ctx<'_>) -> wasmtime::Result<()> {
    let st = c.data();
    let Some(global) = st.body_to_send else {
        return Ok(());
    };
    let n = match st.response {
        Some(_) => 0,
        None => st.req.body.len() as u32,
    };
    global.set(&mut *c, Val::I32(n as i32))
}

/// Builds the answer `proxy_send_local_response` asks for; `None` for a
/// status outside 200..=999 (a 1xx is not an answer:
/// [`crate::middleware::final_status`]) or a header that is not valid HTTP;
/// [`HeaderLimit::Count`] past [`MAX_HEADERS`] (the call traps, as for the
/// request's headers).
fn local_response(
    status: u32,
    body: &[u8],
    headers: &[u8],
) -> Result<Option<MwResponse>, HeaderLimit> {
    let parsed = || {
        let status = StatusCode::from_u16(u16::try_from(status).ok()?).ok()?;
        (!status.is_informational()).then_some(())?;
        Some((status, abi::deserialize_map(headers)?))
    };
    let Some((status, pairs)) = parsed() else {
        return Ok(None);
    };
    if pairs.len() > MAX_HEADERS {
        return Err(HeaderLimit::Count);
    }
    let mut map = HeaderMap::with_capacity(pairs.len());
    for (k, v) in pairs {
        let (Ok(k), Ok(v)) = (HeaderName::from_bytes(k), HeaderValue::from_bytes(v)) else {
            return Ok(None);
        };
        map.try_append(k, v).map_err(|_| HeaderLimit::Count)?;
    }
    Ok(Some(MwResponse {
        status,
        headers: map,
        body: Bytes::copy_from_slice(body),
    }))
}

fn define_misc(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        "env",
        "proxy_log",
        |mut c: Ctx<'_>, level: u32, p: u32, l: u32| {
            let Some((mem, st)) = split(&mut c) else {
                return abi::INVALID_MEMORY_ACCESS;
            };
            let Some(msg) = slice(mem, p, l) else {
                return abi::INVALID_MEMORY_ACCESS;
            };
            log(level, &st.plugin, msg);
            abi::OK
        },
    )?;
    linker.func_wrap("env", "proxy_get_log_level", |mut c: Ctx<'_>, rp: u32| {
        let level = log_level();
        match split(&mut c).and_then(|(mem, _)| write_u32(mem, rp, level)) {
            Some(()) => abi::OK,
            None => abi::INVALID_MEMORY_ACCESS,
        }
    })?;
    linker.func_wrap(
        "env",
        "proxy_get_current_time_nanoseconds",
        |mut c: Ctx<'_>, rp: u32| {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            let Some((mem, _)) = split(&mut c) else {
                return abi::INVALID_MEMORY_ACCESS;
            };
            match mem.get_mut(rp as usize..rp as usize + 8) {
                Some(out) => {
                    out.copy_from_slice(&now.to_le_bytes());
                    abi::OK
                }
                None => abi::INVALID_MEMORY_ACCESS,
            }
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_get_property",
        |mut c: Ctx<'_>, p: u32, l: u32, rp: u32, rl: u32| {
            let value = match split(&mut c) {
                Some((mem, st)) => match slice(mem, p, l) {
                    Some(path) => property(st, path),
                    None => return Ok(abi::INVALID_MEMORY_ACCESS),
                },
                None => return Ok(abi::INVALID_MEMORY_ACCESS),
            };
            match value {
                Some(v) => give(&mut c, &v, rp, rl),
                None => Ok(abi::NOT_FOUND),
            }
        },
    )?;
    // One context runs at a time on an instance, so the effective context
    // is always the one being called: nothing to switch.
    linker.func_wrap("env", "proxy_set_effective_context", |_: u32| abi::OK)?;
    Ok(())
}

/// Envoy's property paths that make sense here; segments are NUL-separated.
fn property(st: &HostState, path: &[u8]) -> Option<Vec<u8>> {
    let header = |name: &[u8]| st.req.get(name);
    Some(match path {
        b"plugin_root_id" | b"plugin_name" => st.plugin.name.as_bytes().to_vec(),
        b"request\0path" => header(b":path")?,
        b"request\0url_path" => st.req.path.as_bytes().to_vec(),
        b"request\0query" => st.req.query.as_deref()?.as_bytes().to_vec(),
        b"request\0method" => header(b":method")?,
        b"request\0host" => header(b":authority")?,
        b"request\0scheme" => b"http".to_vec(),
        b"source\0address" => st.remote.to_string().into_bytes(),
        _ => return None,
    })
}

/// `proxy_log` levels (trace..critical) onto tracing's, under target `wasm`.
/// Control characters are escaped: a module's newline would otherwise start
/// a line of its own making in the gateway's log, and an escape sequence
/// could rewrite what a terminal shows.
fn log(level: u32, plugin: &PluginInfo, msg: &[u8]) {
    let (api, name) = (&plugin.api_id, &plugin.name);
    let msg = crate::error::log_bytes(msg, true);
    match level {
        0 => tracing::trace!(target: "wasm", api_id = %api, plugin = %name, "{msg}"),
        1 => tracing::debug!(target: "wasm", api_id = %api, plugin = %name, "{msg}"),
        2 => tracing::info!(target: "wasm", api_id = %api, plugin = %name, "{msg}"),
        3 => tracing::warn!(target: "wasm", api_id = %api, plugin = %name, "{msg}"),
        _ => tracing::error!(target: "wasm", api_id = %api, plugin = %name, "{msg}"),
    }
}

/// The most verbose ABI level tracing would print, so modules can skip
/// formatting messages nobody reads.
fn log_level() -> u32 {
    use tracing::level_filters::LevelFilter;
    match LevelFilter::current() {
        LevelFilter::TRACE => 0,
        LevelFilter::DEBUG => 1,
        LevelFilter::INFO => 2,
        LevelFilter::WARN => 3,
        LevelFilter::ERROR => 4,
        _ => 5,
    }
}

/// Returns `Unimplemented`, logging the first call of each function, with
/// the API and the module that made it (later callers are not named: the
/// log stays bounded whatever modules do).
fn unimplemented(plugin: &PluginInfo, what: &'static str) -> u32 {
    static SEEN: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let first = SEEN
        .get_or_init(Default::default)
        .lock()
        .map(|mut s| s.insert(what))
        .unwrap_or(false);
    if first {
        tracing::warn!(
            target: "wasm",
            function = what,
            api_id = %plugin.api_id,
            plugin = %plugin.name,
            "wasm plugin {} ({}) called a proxy-wasm function this host does not implement; \
             it got Unimplemented (logged once per function, for the first module that calls it)",
            plugin.name,
            plugin.file.display()
        );
    }
    abi::UNIMPLEMENTED
}

/// The rest of ABI 0.2.1 (and 0.2.0's three extra names), with their
/// parameters: `i` a 32-bit integer (pointer, length, id), `I` the metric
/// functions' 64-bit value. All return a status.
const UNIMPLEMENTED: &[(&str, &str)] = &[
    ("proxy_set_tick_period_milliseconds", "i"),
    ("proxy_set_property", "iiii"),
    ("proxy_get_shared_data", "iiiii"),
    ("proxy_set_shared_data", "iiiii"),
    ("proxy_register_shared_queue", "iii"),
    ("proxy_resolve_shared_queue", "iiiii"),
    ("proxy_dequeue_shared_queue", "iii"),
    ("proxy_enqueue_shared_queue", "iii"),
    ("proxy_continue_stream", "i"),
    ("proxy_close_stream", "i"),
    ("proxy_continue_request", ""),
    ("proxy_continue_response", ""),
    ("proxy_clear_route_cache", ""),
    ("proxy_http_call", "iiiiiiiiii"),
    ("proxy_grpc_call", "iiiiiiiiiiii"),
    ("proxy_grpc_stream", "iiiiiiiii"),
    ("proxy_grpc_send", "iiii"),
    ("proxy_grpc_cancel", "i"),
    ("proxy_grpc_close", "i"),
    ("proxy_get_status", "iii"),
    ("proxy_call_foreign_function", "iiiiii"),
    ("proxy_done", ""),
    ("proxy_define_metric", "iiii"),
    ("proxy_get_metric", "ii"),
    ("proxy_record_metric", "iI"),
    ("proxy_increment_metric", "iI"),
];

fn define_unimplemented(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    for &(name, params) in UNIMPLEMENTED {
        let params = params.chars().map(|c| match c {
            'I' => ValType::I64,
            _ => ValType::I32,
        });
        let ty = wasmtime::FuncType::new(linker.engine(), params, [ValType::I32]);
        linker.func_new("env", name, ty, move |c, _, results: &mut [Val]| {
            results[0] = Val::I32(unimplemented(&c.data().plugin, name) as i32);
            Ok(())
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{self, Write};

    /// What tracing printed while `f` ran.
    fn logged(f: impl FnOnce()) -> String {
        #[derive(Clone, Default)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl Write for Buf {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let out = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || out.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::TRACE)
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let text = buf.0.lock().unwrap().clone();
        String::from_utf8(text).unwrap()
    }

    fn plugin() -> PluginInfo {
        PluginInfo {
            name: "Forger".into(),
            api_id: "shop".into(),
            file: "/plugins/forger.wat".into(),
            config: None,
        }
    }

    #[test]
    fn a_modules_log_message_cannot_forge_a_log_line() {
        let out = logged(|| {
            log(
                2,
                &plugin(),
                b"hello\n2026-01-01T00:00:00Z ERROR gateway: FORGED\r\x1b[31mred",
            )
        });
        assert_eq!(out.lines().count(), 1, "{out}");
        assert!(
            out.contains(r"hello\n2026-01-01T00:00:00Z ERROR gateway: FORGED\r\u{1b}[31mred"),
            "{out}"
        );
        assert!(!out.contains('\x1b'), "{out}");
        // A module's 8 MiB message is one line of the bound's length: the
        // rest is cut, its length noted.
        let big = vec![b'\n'; 8 << 20];
        let out = logged(|| log(2, &plugin(), &big));
        assert_eq!(out.lines().count(), 1, "{}", &out[..200]);
        assert!(
            out.len() < crate::error::MAX_LOG_TEXT + 400,
            "{}",
            out.len()
        );
        assert!(
            out.contains(r"\n\n... [cut: the message is 8388608 bytes long]"),
            "{}",
            &out[out.len() - 200..]
        );
    }

    #[test]
    fn the_unimplemented_warning_names_the_api_and_the_module() {
        let out = logged(|| {
            assert_eq!(
                unimplemented(&plugin(), "proxy_test_only_function"),
                abi::UNIMPLEMENTED
            )
        });
        assert!(out.contains("shop"), "{out}");
        assert!(out.contains("Forger (/plugins/forger.wat)"), "{out}");
        assert!(out.contains("proxy_test_only_function"), "{out}");
    }
}
