//! The response and virtual-endpoint phases on boa: their dispatch
//! expressions, compiled once per context beside the request phase's, and
//! a call of each.
//!
//! A response call hands the script two objects made natively for it: the
//! `response` (Tyk's `MiniResponseObject`: `StatusCode`, `Body`, `Headers`,
//! `SetHeaders`, `DeleteHeaders`) and the `request` the upstream got (the
//! request phase's object, with `Body` null as Tyk sends it). As the
//! request's, the response's `Headers` is built on first read
//! ([`LazyHeaders`]). A virtual
//! endpoint's call hands its function the request as JSON and parses the
//! JSON `TykJsResponse` returns (`phase.rs`): that is Tyk's own API.

use std::time::Instant;

use boa_engine::gc::{Finalize, Trace};
use boa_engine::object::builtins::{JsArray, JsFunction};
use boa_engine::object::ObjectInitializer;
use boa_engine::property::Attribute;
use boa_engine::{
    js_string, Context, JsData, JsObject, JsResult, JsString, JsValue, NativeFunction, Script,
    Source,
};
use http::HeaderMap;

use crate::heap::Uncounted;

use super::super::bodies::RESPONSE_BODY;
use super::super::headtext::HeadText;
use super::super::phase::{endpoint_answer, endpoint_request, ResponseEdits};
use super::super::prelude::HOST_GLOBAL;
use super::super::request::{self, get, opt_object, plain, shape, string_map, strings};
use super::super::text;
use super::{collect_large_body, is_identifier, BuildError, CallError, Sources, Vm, LARGE_BODY};
use crate::middleware::{MwError, MwRequest, MwResponse};

/// The compiled dispatch of each response entry and virtual endpoint.
pub(crate) struct Phases {
    response: Vec<Script>,
    endpoints: Vec<Script>,
    headers: LazyHeaders,
}

/// Compiles the dispatch of every response entry and virtual endpoint of
/// `src`, after checking each names what it must (an object with
/// `ProcessResponse`, a global function).
pub(super) fn compile(src: &Sources, ctx: &mut Context) -> Result<Phases, BuildError> {
    let h = HOST_GLOBAL;
    let mut phases = Phases {
        response: Vec::new(),
        endpoints: Vec::new(),
        headers: LazyHeaders::new(ctx),
    };
    for (name, field) in &src.response {
        let check = format!(
            "(typeof {name} === 'object' && {name} !== null) && typeof {name}.ProcessResponse === 'function'"
        );
        require(ctx, name, field, &check, || {
            format!(
                "the scripts define no object {name:?} with a ProcessResponse function (expected `var {name} = new TykJS.TykMiddleware.NewMiddleware({{}})` and `{name}.NewProcessResponse(...)`)"
            )
        })?;
        // Caught at the script's own level, as the request dispatch is
        // (see `vm.rs`: an uncaught exception leaks boa stack slots).
        let expr = super::caught(&format!(
            "{name}.ProcessResponse({h}.response, {h}.request, {{}}, {h}.spec)"
        ));
        phases.response.push(parse(ctx, &expr, name, field)?);
    }
    for ((function, field), use_session) in src.endpoints.iter().zip(&src.sessions) {
        let check = format!("typeof {function} === 'function'");
        require(ctx, function, field, &check, || {
            format!("the scripts define no function {function:?} (response_function_name)")
        })?;
        let session = session_argument(*use_session);
        let expr = super::caught(&format!(
            "{function}(JSON.parse({h}.vrequest), {session}, {h}.spec)"
        ));
        phases.endpoints.push(parse(ctx, &expr, function, field)?);
    }
    Ok(phases)
}

/// A virtual endpoint's session argument, as JS source (shared with the
/// QuickJS host): with `use_session`, Tyk passes the request's session,
/// which a keyless API does not have, so its JSON is `null`; without, a new
/// session, which the JS host gives as `{}`.
pub(crate) fn session_argument(use_session: bool) -> &'static str {
    if use_session {
        "null"
    } else {
        "{}"
    }
}

fn require(
    ctx: &mut Context,
    name: &str,
    field: &str,
    check: &str,
    missing: impl FnOnce() -> String,
) -> Result<(), BuildError> {
    let fail = |message: String| BuildError {
        field: field.to_string(),
        message,
    };
    if !is_identifier(name) {
        return Err(fail(format!("{name:?} is not a JavaScript identifier")));
    }
    match ctx.eval(Source::from_bytes(check)) {
        Ok(v) if v.as_boolean() == Some(true) => Ok(()),
        _ => Err(fail(missing())),
    }
}

fn parse(ctx: &mut Context, expr: &str, name: &str, field: &str) -> Result<Script, BuildError> {
    Script::parse(Source::from_bytes(expr), None, ctx).map_err(|e| BuildError {
        field: field.to_string(),
        message: format!("cannot compile the dispatch for {name:?}: {e}"),
    })
}

impl Vm {
    /// Runs response entry `index` on `resp`; `req` is the request as it
    /// went upstream.
    pub(crate) async fn call_response(
        &mut self,
        index: usize,
        req: &MwRequest,
        resp: &mut MwResponse,
        deadline: Instant,
    ) -> Result<(), CallError> {
        let failed = |e: String| CallError::Failed(MwError::internal(e));
        let ctx = &mut self.ctx;
        let built =
            request::build(req, &mut self.accessors, ctx).map_err(|e| failed(e.to_string()))?;
        let _ = built
            .object
            .set(js_string!("Body"), JsValue::null(), false, ctx);
        let (object, body) =
            response_object(resp, &self.phases.headers, ctx).map_err(|e| failed(e.to_string()))?;
        self.hand(js_string!("request"), built.object.into());
        self.hand(js_string!("response"), object.into());
        let script = self.phases.response[index].clone();
        let ret = self.run(&script, deadline).await;
        // The response (and its body) is garbage after the call.
        self.hand(js_string!("response"), JsValue::undefined());
        let edits = ret
            .and_then(|ret| response_edits(&ret, &body, &mut self.ctx).map_err(CallError::answer));
        if resp.body.len() >= LARGE_BODY {
            collect_large_body();
        }
        let mut edits = edits?;
        // What goes into `resp` is the host's (`heap.rs`): the new body's
        // bytes leave the count with it.
        if let Some(body) = &edits.body {
            crate::heap::released(body.capacity());
        }
        crate::heap::uncounted(|| edits.apply_to(resp)).map_err(CallError::Failed)
    }

    /// Runs virtual endpoint `index` on `req`: its answer.
    pub(crate) async fn call_endpoint(
        &mut self,
        index: usize,
        req: &MwRequest,
        deadline: Instant,
    ) -> Result<MwResponse, CallError> {
        let json = JsString::from(endpoint_request(req).as_str());
        self.hand(js_string!("vrequest"), json.into());
        let script = self.phases.endpoints[index].clone();
        let ret = self.run(&script, deadline).await?;
        let answer = ret.as_string().ok_or_else(|| {
            CallError::Failed(MwError::bad_answer(format!(
                "the virtual endpoint returned {} (a JS {}), not TykJsResponse(...)'s JSON",
                super::value_text(&ret),
                ret.type_of()
            )))
        })?;
        // The answer leaves this thread (`heap.rs`).
        crate::heap::uncounted(|| endpoint_answer(&text::lossy(&answer))).map_err(CallError::Failed)
    }
}

/// Tyk's `MiniResponseObject` for `resp`, and the body string it carries
/// (to tell "unchanged" from a rewrite). Every response object of a context
/// has one shape: the same fields, in Tyk's order, with the same attributes.
fn response_object(
    resp: &MwResponse,
    lazy: &LazyHeaders,
    ctx: &mut Context,
) -> JsResult<(JsObject, JsString)> {
    let body = JsString::from(String::from_utf8_lossy(&resp.body).as_ref());
    let sets = plain(ctx);
    let deletes = JsArray::new(ctx)?;
    let held = HeldHeaders {
        headers: Uncounted::make(|| resp.headers.clone()),
        value: None,
    };
    let object = ObjectInitializer::with_native_data(held, ctx)
        .property(
            js_string!("StatusCode"),
            resp.status.as_u16(),
            Attribute::all(),
        )
        .property(js_string!("Body"), body.clone(), Attribute::all())
        .accessor(
            js_string!("Headers"),
            Some(lazy.get.clone()),
            Some(lazy.set.clone()),
            Attribute::ENUMERABLE | Attribute::CONFIGURABLE,
        )
        .property(js_string!("SetHeaders"), sets, Attribute::all())
        .property(js_string!("DeleteHeaders"), deletes, Attribute::all())
        .build();
    Ok((object, body))
}

/// `response.Headers`, built on first read.
///
/// Most response hooks never read the upstream's headers (they set or
/// delete some, or rewrite the body), and building them (an object, and an
/// array and a string per header) was ~6% of the response hook's
/// instructions (`cg_routes.py --routes jsvm-response`). As the request's
/// lazy fields (`request/build.rs`), it is an own, enumerable, configurable
/// accessor whose functions are made once per context: the getter builds
/// the object from the headers the response object carries on first read
/// and returns that same object after; the setter replaces it. Reads,
/// writes, `delete`, `in`, `Object.keys`, spreading and `JSON.stringify`
/// see what they would on a data property; `Object.getOwnPropertyDescriptor`
/// shows an accessor. The host never reads `Headers` back: as in Tyk, only
/// `SetHeaders` and `DeleteHeaders` change the response.
struct LazyHeaders {
    get: JsFunction,
    set: JsFunction,
}

impl LazyHeaders {
    fn new(ctx: &mut Context) -> LazyHeaders {
        LazyHeaders {
            get: NativeFunction::from_fn_ptr(|this, _, ctx| {
                request::lazy_get::<HeldHeaders>((), this, ctx)
            })
            .to_js_function(ctx.realm()),
            set: NativeFunction::from_fn_ptr(|this, args, ctx| {
                request::lazy_set::<HeldHeaders>((), this, args, ctx)
            })
            .to_js_function(ctx.realm()),
        }
    }
}

/// What a response object carries for its `Headers`: a snapshot of the
/// upstream's headers (a script that keeps the object sees this call's),
/// and the value once read or written.
struct HeldHeaders {
    /// Shares the upstream's buffers: not in the heap count (`heap.rs`).
    headers: Uncounted<HeaderMap>,
    value: Option<JsValue>,
}

impl Finalize for HeldHeaders {}

// SAFETY: `value` holds the only GC pointer; `headers` is plain Rust data.
unsafe impl Trace for HeldHeaders {
    boa_engine::gc::custom_trace!(this, mark, mark(&this.value));
}

impl JsData for HeldHeaders {}

impl request::LazyData for HeldHeaders {
    /// The one field, `Headers`.
    type Field = ();

    fn key((): ()) -> JsString {
        js_string!("Headers")
    }

    fn slot(&mut self, (): ()) -> &mut Option<JsValue> {
        &mut self.value
    }

    fn materialise(&self, (): (), ctx: &mut Context) -> JsResult<JsValue> {
        request::header_object(&self.headers, ctx).map(JsValue::from)
    }
}

/// Reads the script's `{Response: ...}` answer with Go's type rules.
fn response_edits(
    ret: &JsValue,
    sent: &JsString,
    ctx: &mut Context,
) -> Result<ResponseEdits, MwError> {
    let ret = request::plain_object(ret).ok_or_else(|| {
        shape(
            "the return value",
            "an object (use ReturnResponseData)",
            ret,
        )
    })?;
    let r = get(&ret, js_string!("Response"), ctx)?;
    // Not an array: Go's decoder refuses one for Tyk's struct.
    let r = opt_object(&r, "Response")?
        .filter(|o| !o.is_array())
        .ok_or_else(|| shape("Response", "an object (use ReturnResponseData)", &r))?;
    let code = get(&r, js_string!("StatusCode"), ctx)?;
    let status = match code.as_number() {
        Some(n) => ResponseEdits::status(Some(n))?,
        None if code.is_null_or_undefined() => None,
        None => return Err(shape("Response.StatusCode", "a number", &code)),
    };
    let body = get(&r, js_string!("Body"), ctx)?;
    let body = match body.as_string() {
        Some(s) if s == *sent => None,
        Some(s) => Some(text::body(&s, RESPONSE_BODY)?),
        None if body.is_null_or_undefined() => Some(String::new()),
        None => return Err(shape("Response.Body", "a string", &body)),
    };
    let mut head = HeadText::new();
    let delete = strings(
        &get(&r, js_string!("DeleteHeaders"), ctx)?,
        "Response.DeleteHeaders",
        &mut head,
        ctx,
    )?;
    let set = string_map(
        &get(&r, js_string!("SetHeaders"), ctx)?,
        "Response.SetHeaders",
        &mut head,
        ctx,
    )?;
    Ok(ResponseEdits {
        status,
        body,
        delete,
        set,
    })
}
