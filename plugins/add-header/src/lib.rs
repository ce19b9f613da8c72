//! The seed's Go plugin (`main.go`), as a native plugin: `AddHeader` sets
//! `X-Custom-GoPlugin: hello-from-go-plugin` on every request.
//!
//! To try this: 1. `cargo build --release` at the repo root; 2. start the mock
//! upstream and the gateway with `--apis apis`; 3. `curl
//! localhost:8091/gopl/hello/` shows the header in the echoed request.

use plugin_sdk::{export_plugin, PluginError, Request};

fn add_header(req: &mut Request<'_>) -> Result<(), PluginError> {
    req.set_header("X-Custom-GoPlugin", "hello-from-go-plugin")
}

export_plugin!(AddHeader => add_header);
