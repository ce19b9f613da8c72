//! A proxy-wasm plugin for the gateway's tests: each request's `x-probe`
//! header picks what it does, so one SDK-built module exercises every host
//! function the gateway implements, and every way a module can fail.
//!
//! Built by gateway/build.rs (`cargo build --example probe`) into
//! `target/wasm/probe.wasm`; loaded by `gateway/tests/wasm_*.rs`.

use std::cell::Cell;
use std::rc::Rc;

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Trace);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        Box::new(Root { config: Rc::default(), served: Rc::default() })
    });
}}

struct Root {
    /// The plugin configuration (the API's `config_data`).
    config: Rc<String>,
    /// Requests this instance has seen: shows instance reuse and reset.
    served: Rc<Cell<u64>>,
}

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, _size: usize) -> bool {
        let config = self.get_plugin_configuration().unwrap_or_default();
        let text = String::from_utf8(config).unwrap_or_default();
        // A configuration the plugin refuses: the gateway must fail the load.
        if text.contains("reject-me") {
            return false;
        }
        self.config = Rc::new(text);
        true
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }

    fn create_http_context(&self, _id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Probe {
            config: self.config.clone(),
            served: self.served.clone(),
            mode: String::new(),
        }))
    }
}

struct Probe {
    config: Rc<String>,
    served: Rc<Cell<u64>>,
    mode: String,
}

impl Context for Probe {}

impl Probe {
    fn headers(&mut self) {
        let got = self.get_http_request_header("x-in").unwrap_or_default();
        self.set_http_request_header("x-out", Some(&format!("got:{got}")));
        self.set_http_request_header("x-remove", None);
        self.add_http_request_header("x-added", "one");
        self.add_http_request_header("x-added", "two");
        for (pseudo, out) in [
            (":path", "x-seen-path"),
            (":method", "x-seen-method"),
            (":authority", "x-seen-authority"),
        ] {
            let v = self.get_http_request_header(pseudo).unwrap_or_default();
            self.set_http_request_header(out, Some(&v));
        }
        let all = self.get_http_request_headers();
        let names: Vec<String> = all.iter().map(|(k, _)| k.clone()).collect();
        self.set_http_request_header("x-all", Some(&names.join(" ")));
    }

    fn context(&mut self) {
        let root = self.get_property(vec!["plugin_root_id"]).unwrap_or_default();
        let root = String::from_utf8(root).unwrap_or_default();
        self.set_http_request_header("x-root-id", Some(&root));
        let config = self.config.to_string();
        self.set_http_request_header("x-config", Some(&config));
        let now = self.get_current_time();
        let secs = now
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.set_http_request_header("x-time", Some(&secs.to_string()));
        proxy_wasm::hostcalls::log(LogLevel::Info, "probe: context read").unwrap();
    }
}

impl HttpContext for Probe {
    fn on_http_request_headers(&mut self, _n: usize, _end_of_stream: bool) -> Action {
        self.served.set(self.served.get() + 1);
        self.set_http_request_header("x-served", Some(&self.served.get().to_string()));
        self.mode = self.get_http_request_header("x-probe").unwrap_or_default();
        match self.mode.as_str() {
            "headers" => self.headers(),
            "rewrite" => {
                self.set_http_request_header(":path", Some("/rewritten/?by=wasm"));
                self.set_http_request_header(":method", Some("PUT"));
            }
            "respond" => {
                self.send_http_response(403, vec![("x-why", "probe")], Some(b"denied by wasm"));
                return Action::Pause;
            }
            "context" => self.context(),
            "panic" => panic!("probe was asked to panic"),
            "loop" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "grow" => {
                let mut hog: Vec<Vec<u8>> = Vec::new();
                loop {
                    hog.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hog);
                }
            }
            "pause" => return Action::Pause,
            _ => {}
        }
        Action::Continue
    }

    fn on_http_request_body(&mut self, size: usize, _end_of_stream: bool) -> Action {
        if self.mode == "body" {
            let body = self.get_http_request_body(0, size).unwrap_or_default();
            let upper = body.to_ascii_uppercase();
            self.set_http_request_body(0, size, &upper);
            self.set_http_request_header("x-body-len", Some(&size.to_string()));
        }
        Action::Continue
    }
}
