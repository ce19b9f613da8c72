//! The `request` object a script sees (Tyk's MiniRequestObject), built
//! natively per call, and the rules that apply what the script returns.
//!
//! Tyk JSON-encodes the request into the script and JSON-decodes the answer.
//! Here the object is built directly from the [`MwRequest`](crate::middleware::MwRequest)
//! and only the fields a script may change are read back, with the same
//! type rules Go's JSON decoder would enforce (a number where a string
//! belongs is an error).
//!
//! - [`build`](mod@build): the object, its fields in Tyk's order (one table,
//!   `fields!`), the lazily built object-valued fields and the rule that
//!   every request object of a context has one shape.
//! - [`apply`](mod@apply): the answer, read and applied in named phases
//!   (overrides, body, URL, headers, query), and the typed readers the
//!   other phases and strategies share.

mod apply;
mod build;

pub(crate) use apply::{
    apply, bad_header_name, bad_header_value, edit_query, get, header, not_a_map, opt_object,
    own_data, plain_object, put_header, set_url, shape, spends_context, string_map, strings,
};
pub(crate) use build::{
    build, header_object, lazy_get, lazy_set, name, plain, put_data, Accessors, LazyData,
};

/// Go's `textproto.CanonicalMIMEHeaderKey`, the one implementation both
/// crates use (`gateway_wire::header`): Tyk's scripts index
/// `request.Headers["X-Api-Key"]`.
pub(crate) use gateway_wire::canonical_header_key as canonical;

#[cfg(test)]
mod tests {
    use boa_engine::{js_string, Context, JsValue, Source};
    use bytes::Bytes;
    use http::{HeaderMap, HeaderValue, Method};

    use super::{apply, build, Accessors};
    use crate::middleware::{Flow, MwRequest};

    fn request(method: Method, path: &str, query: Option<&str>, body: &str) -> MwRequest {
        let mut headers = HeaderMap::new();
        headers.insert("host", HeaderValue::from_static("127.0.0.1"));
        headers.insert("x-api-key", HeaderValue::from_str(path).unwrap());
        let uri = match query {
            Some(q) => format!("{path}?{q}").parse().unwrap(),
            None => path.parse().unwrap(),
        };
        MwRequest::new(
            method,
            uri,
            headers,
            Bytes::from(body.to_string()),
            "127.0.0.1:40000".parse().unwrap(),
        )
    }

    /// The shape-preserving rule (`build.rs`): every request object a
    /// context builds has one shared shape, whatever the request (method,
    /// body, query, headers), across the batches of spare objects, and a
    /// script that reads and writes the lazy fields as the seed's does
    /// leaves it as built (so the inline caches of its reads keep hitting).
    /// A call that added, removed or reconfigured a property, or a blank
    /// object built in another order, fails here.
    #[test]
    fn every_call_gets_one_shape() {
        let mut ctx = Context::default();
        let stringify = crate::js::json::install(&mut ctx).unwrap();
        let mut acc = Accessors::new(stringify, &mut ctx);
        let script = ctx
            .eval(Source::from_bytes(
                "(function (r) { var k = r.Headers['X-Api-Key']; r.SetHeaders['X-Seen'] = k[0]; \
                 r.Params; r.DeleteHeaders.push('x-gone'); return {Request: r, SessionMeta: {}}; })",
            ))
            .unwrap();
        let script = script.as_callable().unwrap().clone();
        let requests = [
            request(Method::GET, "/a/", None, ""),
            request(Method::POST, "/b/c", Some("x=1&y=2"), "a body"),
            request(Method::DELETE, "/", Some("z"), ""),
            request(Method::from_bytes(b"PURGE").unwrap(), "/p", None, "{}"),
        ];
        let mut first = None;
        let mut cache = crate::intern::HeaderCache::default();
        // More calls than one batch of spares (16).
        for i in 0..40 {
            let mut req = requests[i % requests.len()].clone();
            let built = build(&req, &mut acc, &mut ctx).unwrap();
            let shape = built.object.borrow().shape().to_addr_usize();
            assert!(built.unchanged(), "call {i}: the built shape is not shared");
            match first {
                None => first = Some(shape),
                Some(s) => assert_eq!(shape, s, "call {i}: a request object with a new shape"),
            }
            let ret = script
                .call(
                    &JsValue::undefined(),
                    &[built.object.clone().into()],
                    &mut ctx,
                )
                .unwrap();
            assert!(
                built.unchanged(),
                "call {i}: the script's reads reshaped the request"
            );
            let flow = apply(&ret, &built, &acc, &mut cache, &mut req, &mut ctx).unwrap();
            assert!(matches!(flow, Flow::Continue));
            assert_eq!(req.headers["x-seen"], req.path(), "call {i}");
        }
        // The check itself: a property the host adds is a new shape.
        let built = build(&requests[0], &mut acc, &mut ctx).unwrap();
        built
            .object
            .set(js_string!("Extra"), 1, false, &mut ctx)
            .unwrap();
        assert!(!built.unchanged());
    }

    /// The query edits as Tyk's loop states them, one `Set` at a time
    /// (`values.retain` per added name: quadratic), against `edited`'s
    /// sets, over random queries and edits drawn from few names (so they
    /// collide: a name deleted and added, added twice, extended and
    /// added).
    #[test]
    fn query_edits_match_tyk_s_loop() {
        fn tyk_loop(
            mut values: Vec<(String, String)>,
            deletes: &[String],
            adds: &[(String, String)],
            extended: &[(String, Vec<String>)],
        ) -> Vec<(String, String)> {
            values.retain(|(k, _)| !deletes.contains(k));
            for (k, v) in adds {
                values.retain(|(name, _)| name != k);
                values.push((k.clone(), v.clone()));
            }
            for (k, vals) in extended {
                values.extend(vals.iter().map(|v| (k.clone(), v.clone())));
            }
            values.sort_by(|a, b| a.0.cmp(&b.0));
            values
        }
        let mut rng = fastrand::Rng::with_seed(12);
        let name = |rng: &mut fastrand::Rng| ["a", "b", "c", "d", "e"][rng.usize(..5)].to_string();
        let value = |rng: &mut fastrand::Rng| rng.u8(..4).to_string();
        for case in 0..2000 {
            let values: Vec<_> = (0..rng.usize(..6))
                .map(|_| (name(&mut rng), value(&mut rng)))
                .collect();
            let deletes: Vec<_> = (0..rng.usize(..3)).map(|_| name(&mut rng)).collect();
            let adds: Vec<_> = (0..rng.usize(..4))
                .map(|_| (name(&mut rng), value(&mut rng)))
                .collect();
            let extended: Vec<_> = (0..rng.usize(..3))
                .map(|_| {
                    let vals = (0..rng.usize(..3)).map(|_| value(&mut rng)).collect();
                    (name(&mut rng), vals)
                })
                .collect();
            assert_eq!(
                super::apply::edited(values.clone(), &deletes, &adds, &extended),
                tyk_loop(values.clone(), &deletes, &adds, &extended),
                "case {case}: {values:?} - {deletes:?} + {adds:?} ++ {extended:?}"
            );
        }
    }
}
