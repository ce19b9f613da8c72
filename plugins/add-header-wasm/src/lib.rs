//! The seed's Go plugin (`main.go`) as a proxy-wasm plugin: on every request
//! it sets `X-Custom-Wasm: hello-from-wasm`, through the same ABI call Envoy
//! or Kong would serve (`proxy_add_header_map_value`).
//!
//! To try this: 1. `cargo build --release` at the repo root (the gateway's
//! build script builds this crate for `wasm32-unknown-unknown` into
//! `target/wasm/add_header_wasm.wasm`); 2. start `target/release/mock-upstream`
//! and `target/release/gateway --apis apis`; 3. `curl
//! localhost:8091/wasm/hello/` shows the header in the echoed request.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(AddHeaderRoot) });
}}

/// The plugin: one per instance, making one [`AddHeader`] per request.
struct AddHeaderRoot;

impl Context for AddHeaderRoot {}

impl RootContext for AddHeaderRoot {
    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(AddHeader))
    }
}

/// One request's context.
struct AddHeader;

impl Context for AddHeader {}

impl HttpContext for AddHeader {
    fn on_http_request_headers(&mut self, _num_headers: usize, _end_of_stream: bool) -> Action {
        // Replace, not add: the seed's Go plugin sets the header (one value
        // even when the client sent its own).
        self.set_http_request_header("X-Custom-Wasm", Some("hello-from-wasm"));
        Action::Continue
    }
}
