//! Peer gateways (`--peer nginx`, `--peer haproxy`, `--peers`): real
//! gateways started by the bench in front of the same mock-upstream, from
//! the config templates in `loadgen/peers/` (embedded at build time, so the
//! bench needs no checkout at run time), stopped like our own children.
//!
//! Each peer serves the seed's "add one header, then proxy" in its native
//! way and in its VM(s), plus a route without middleware:
//! - nginx: `proxy_set_header` (native), njs (`js_set`), LuaJIT
//!   (`access_by_lua_block`, the model Kong and OpenResty run);
//! - HAProxy: `http-request set-header` (native), Lua 5.3 (`http-request lua.*`).
//!
//! Both pool their upstream connections (nginx: `keepalive` with
//! `Connection ""` repeated in every location that sets a header; HAProxy:
//! `http-reuse always`).

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};

use super::apis::Route;
use super::procs::{self, Child, Spawn};

/// The peers the bench knows, in `--peers` order.
pub const NAMES: [&str; 2] = ["nginx", "haproxy"];

const NGINX_CONF: &str = include_str!("../../peers/nginx.conf");
const NGINX_JS: &str = include_str!("../../peers/nginx-hello.js");
const HAPROXY_CFG: &str = include_str!("../../peers/haproxy.cfg");
const HAPROXY_LUA: &str = include_str!("../../peers/haproxy-hello.lua");

/// Where Debian's nginx keeps its dynamic modules.
const NGINX_MODULES: &str = "/usr/lib/nginx/modules";

/// A peer ready to start: its command, its config, and its routes (each
/// possibly skipped because a module is missing).
pub struct Plan {
    /// `nginx` or `haproxy`.
    pub name: &'static str,
    /// The repo file its config comes from.
    pub config: &'static str,
    program: PathBuf,
    /// Routes with the reason a route cannot be measured.
    pub routes: Vec<(Route, Option<String>)>,
    /// Sections of the template to keep (`njs`, `lua`).
    sections: Vec<&'static str>,
}

/// How to install what is missing, said once per message.
pub fn install_hint(name: &str) -> &'static str {
    match name {
        "nginx" => "install it with `apt-get install nginx-light libnginx-mod-http-js libnginx-mod-http-lua` (Debian)",
        _ => "install it with `apt-get install haproxy` (Debian)",
    }
}

/// The repo file a peer's config comes from.
pub fn config_file(name: &str) -> &'static str {
    match name {
        "nginx" => "loadgen/peers/nginx.conf",
        "haproxy" => "loadgen/peers/haproxy.cfg",
        _ => "",
    }
}

/// An executable on PATH or in the sbin directories (not on a user's PATH).
fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// What is installed of `name`, or why it cannot run at all.
pub fn plan(name: &str) -> anyhow::Result<Plan> {
    let unknown = || {
        anyhow::anyhow!(
            "unknown peer {name:?}: known peers are {}",
            NAMES.join(", ")
        )
    };
    if !NAMES.contains(&name) {
        return Err(unknown());
    }
    let Some(program) = find_program(name) else {
        bail!("{name} is not installed; {}", install_hint(name));
    };
    match name {
        "nginx" => Ok(nginx_plan(program)),
        "haproxy" => Ok(haproxy_plan(program)),
        _ => Err(unknown()),
    }
}

/// A route of a peer's config (peers have no API definitions of their own).
fn route(key: &str, label: &str, path: &str, mw: bool) -> Route {
    Route::bare(key, label, path, mw)
}

/// Why a route needs a Debian package that is missing.
fn missing(what: &str, pkg: &str) -> String {
    format!("{what} is not installed; install it with `apt-get install {pkg}` (Debian)")
}

/// nginx: the native route always; njs and LuaJIT when their dynamic
/// modules are installed (Debian ships them as separate packages).
fn nginx_plan(program: PathBuf) -> Plan {
    let module = |m: &str| Path::new(NGINX_MODULES).join(m).is_file();
    let njs = module("ngx_http_js_module.so");
    let lua = module("ngx_http_lua_module.so") && module("ndk_http_module.so");
    let mut sections = Vec::new();
    if njs {
        sections.push("njs");
    }
    if lua {
        sections.push("lua");
    }
    let njs_route = route("njs", "njs (js_set)", "/jsvm/hello/", true);
    let lua_route = route("lua", "LuaJIT (access_by_lua)", "/lua/hello/", true);
    Plan {
        name: "nginx",
        config: config_file("nginx"),
        program,
        sections,
        routes: vec![
            (
                route("native", "native (proxy_set_header)", "/gopl/hello/", true),
                None,
            ),
            (
                njs_route,
                (!njs).then(|| missing("nginx's njs module", "libnginx-mod-http-js")),
            ),
            (
                lua_route,
                (!lua).then(|| missing("nginx's Lua module", "libnginx-mod-http-lua")),
            ),
            (
                route("plain", "no middleware", "/plain/hello/", false),
                None,
            ),
        ],
    }
}

/// HAProxy: the native route always; the Lua route when `haproxy -vv` says
/// it was built with Lua.
fn haproxy_plan(program: PathBuf) -> Plan {
    let vv = std::process::Command::new(&program).arg("-vv").output();
    let lua = vv.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("Built with Lua"));
    let no_lua = "this HAProxy is built without Lua; install Debian's `haproxy`";
    Plan {
        name: "haproxy",
        config: config_file("haproxy"),
        program,
        sections: if lua { vec!["lua"] } else { Vec::new() },
        routes: vec![
            (
                route("native", "native (set-header)", "/gopl/hello/", true),
                None,
            ),
            (
                route("lua", "Lua 5.3 (lua action)", "/lua/hello/", true),
                (!lua).then(|| no_lua.to_string()),
            ),
            (
                route("plain", "no middleware", "/plain/hello/", false),
                None,
            ),
        ],
    }
}

/// Fills the template: placeholders replaced, `#section#` lines kept
/// (uncommented) when the section is installed, dropped otherwise.
pub fn render(template: &str, sections: &[&str], vars: &[(&str, String)]) -> String {
    let mut out = String::with_capacity(template.len());
    for line in template.lines() {
        let mut line = line.to_string();
        if let Some(rest) = line.strip_prefix('#') {
            if let Some((tag, body)) = rest.split_once('#') {
                if !tag.is_empty() && tag.chars().all(|c| c.is_ascii_lowercase()) {
                    if !sections.contains(&tag) {
                        continue;
                    }
                    line = body.to_string();
                }
            }
        }
        for (k, v) in vars {
            line = line.replace(&format!("{{{{{k}}}}}"), v);
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// A free loopback port (peers cannot report a port 0 back to us).
fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A started peer.
pub struct Running {
    /// Its process (the master, for nginx).
    pub child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
}

/// Writes the peer's config into `dir` and starts it in the foreground.
///
/// The peer is told a port found free, which another process can take
/// before the peer binds it; a start that fails so is retried on another
/// port (three tries).
pub fn start(
    plan: &Plan,
    dir: &Path,
    upstream_port: u16,
    workers: usize,
    cpus: Option<&[usize]>,
) -> anyhow::Result<Running> {
    let mut tries = 0;
    loop {
        tries += 1;
        match start_on(plan, dir, free_port()?, upstream_port, workers, cpus) {
            Err(e) if tries < 3 && port_was_taken(&e) => continue,
            done => return done,
        }
    }
}

/// Whether a failed start says its port was in use (nginx: "bind() to ...
/// failed (98: Address already in use)", HAProxy: "cannot bind socket
/// (Address already in use)").
fn port_was_taken(e: &anyhow::Error) -> bool {
    format!("{e:#}").contains("Address already in use")
}

fn start_on(
    plan: &Plan,
    dir: &Path,
    port: u16,
    upstream_port: u16,
    workers: usize,
    cpus: Option<&[usize]>,
) -> anyhow::Result<Running> {
    std::fs::create_dir_all(dir.join("tmp"))?;
    let vars = [
        ("DIR", dir.to_string_lossy().into_owned()),
        ("PORT", port.to_string()),
        ("UPSTREAM_PORT", upstream_port.to_string()),
        ("WORKERS", workers.to_string()),
        ("MODULES", NGINX_MODULES.to_string()),
    ];
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))?;
        anyhow::Ok(p)
    };
    let args: Vec<String> = if plan.name == "nginx" {
        write("nginx-hello.js", NGINX_JS)?;
        let conf = write("nginx.conf", &render(NGINX_CONF, &plan.sections, &vars))?;
        let prefix = dir.to_string_lossy().into_owned();
        vec![
            "-p".into(),
            prefix,
            "-c".into(),
            conf.to_string_lossy().into_owned(),
        ]
    } else {
        write("haproxy-hello.lua", HAPROXY_LUA)?;
        let cfg = write("haproxy.cfg", &render(HAPROXY_CFG, &plan.sections, &vars))?;
        vec![
            "-db".into(),
            "-f".into(),
            cfg.to_string_lossy().into_owned(),
        ]
    };
    let mut child = Child::spawn(&Spawn {
        name: plan.name,
        program: &plan.program,
        args: &args,
        cwd: dir,
        log: dir.join(format!("{}.log", plan.name)),
        cpus,
    })?;
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    procs::wait_ready(&mut child, addr, "/plain/hello/", Duration::from_secs(10))
        .with_context(|| format!("{} (config from {}) did not start", plan.name, plan.config))?;
    Ok(Running { child, addr })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_keep_installed_sections_and_fill_placeholders() {
        let t = "a {{PORT}}\n#lua# lua {{PORT}}\n#njs# njs\n# a comment\n";
        let out = render(t, &["lua"], &[("PORT", "80".into())]);
        assert_eq!(out, "a 80\n lua 80\n# a comment\n");
    }

    #[test]
    fn every_placeholder_of_the_repo_templates_is_known() {
        let vars: Vec<(&str, String)> = ["DIR", "PORT", "UPSTREAM_PORT", "WORKERS", "MODULES"]
            .iter()
            .map(|k| (*k, "x".to_string()))
            .collect();
        for t in [NGINX_CONF, HAPROXY_CFG] {
            let out = render(t, &["njs", "lua"], &vars);
            assert!(!out.contains("{{"), "{out}");
        }
    }
}
