//! `JSON.parse` for boa, built natively from serde_json's parser.
//!
//! boa 0.22's `JSON.parse` validates the text with serde_json, then wraps it
//! in parentheses and runs it as a script: lexed, parsed into an AST,
//! compiled to bytecode and executed, every call. On the bench's response
//! hook (`JSON.parse` of the upstream's ~400-byte echo) that was 174,000
//! instructions of a 400,000-instruction call, the virtual endpoint's
//! request 200,000. Scripts parse request and response bodies all the time,
//! so this replaces it in every boa context: the same serde_json parser
//! (so the same texts are accepted and refused, with the same messages,
//! and the same 128-level nesting limit), building the values directly as
//! it reads them, objects from the root shape as an object literal's are.
//! With a reviver (rare) the call goes to boa's own `JSON.parse`, which
//! hands the reviver the source text it needs.
//!
//! What the builder keeps, as the spec's `JSON.parse` does: keys in text
//! order (array-index keys first, as every object orders them), a repeated
//! key's last value at its first position, `__proto__` as an own data
//! property, `-0` as minus zero. Numbers are read with serde_json's
//! `float_roundtrip` (enabled in `Cargo.toml`), the correctly rounded
//! parse a JS engine does. `cargo test -p gateway json::` compares it with
//! boa's own on a corpus of texts.

use std::fmt;

use boa_engine::object::builtins::JsArray;
use boa_engine::property::PropertyKey;
use boa_engine::{Context, JsNativeError, JsObject, JsResult, JsString, JsValue};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use super::request::plain;

/// Replaces `JSON.parse` in `ctx`'s realm (boa's own is kept for revivers).
pub(crate) fn install(ctx: &mut Context) -> JsResult<()> {
    let json = ctx.intrinsics().objects().json();
    let original = super::depth::method(&json, "parse", ctx)?;
    let parse = boa_engine::NativeFunction::from_copy_closure_with_captures(
        |this, args, orig: &JsObject, ctx| {
            if args.get(1).is_some_and(JsValue::is_callable) {
                return orig.call(this, args, ctx);
            }
            let text = args.first().cloned().unwrap_or_default().to_string(ctx)?;
            // As boa's: text that is not Unicode (a lone surrogate) is refused.
            let text = text
                .to_std_string()
                .map_err(|e| JsNativeError::syntax().with_message(e.to_string()))?;
            parse(&text, ctx)
        },
        original,
    );
    super::depth::replace(&json, "parse", 2, parse, ctx)
}

/// The value of JSON text `text`, or the `SyntaxError` boa would throw.
pub(crate) fn parse(text: &str, ctx: &mut Context) -> JsResult<JsValue> {
    let mut de = serde_json::Deserializer::from_str(text);
    let mut failure = None;
    let value = Build {
        ctx,
        failure: &mut failure,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    match (value, failure) {
        (_, Some(e)) => Err(e),
        (Ok(v), None) => Ok(v),
        (Err(e), None) => Err(JsNativeError::syntax().with_message(e.to_string()).into()),
    }
}

/// Builds one JSON value (and, recursively, its members) in `ctx`. A JS
/// error while building (none is expected: the objects are new and
/// ordinary) is kept in `failure` and stops the parse.
struct Build<'a> {
    ctx: &'a mut Context,
    failure: &'a mut Option<boa_engine::JsError>,
}

impl Build<'_> {
    fn again(&mut self) -> Build<'_> {
        Build {
            ctx: self.ctx,
            failure: self.failure,
        }
    }
}

/// A JSON number as boa holds a literal: an `i32` when it is one, else `f64`.
fn number(n: f64) -> JsValue {
    let i = n as i32;
    if f64::from(i) == n && !(n == 0.0 && n.is_sign_negative()) {
        JsValue::from(i)
    } else {
        JsValue::from(n)
    }
}

impl<'de> DeserializeSeed<'de> for Build<'_> {
    type Value = JsValue;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<JsValue, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Build<'_> {
    type Value = JsValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<JsValue, E> {
        Ok(JsValue::null())
    }

    fn visit_bool<E>(self, v: bool) -> Result<JsValue, E> {
        Ok(JsValue::from(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<JsValue, E> {
        Ok(i32::try_from(v).map_or_else(|_| JsValue::from(v as f64), JsValue::from))
    }

    fn visit_u64<E>(self, v: u64) -> Result<JsValue, E> {
        Ok(i32::try_from(v).map_or_else(|_| JsValue::from(v as f64), JsValue::from))
    }

    fn visit_f64<E>(self, v: f64) -> Result<JsValue, E> {
        Ok(number(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<JsValue, E> {
        Ok(JsString::from(v).into())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<JsValue, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(self.again())? {
            items.push(v);
        }
        Ok(JsArray::from_iter(items, self.ctx).into())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<JsValue, A::Error> {
        let object = plain(self.ctx);
        while let Some(key) = map.next_key_seed(Key)? {
            let value = map.next_value_seed(self.again())?;
            if let Err(e) = object.create_data_property_or_throw(key, value, self.ctx) {
                *self.failure = Some(e);
                return Err(de::Error::custom("JSON.parse: cannot define a property"));
            }
        }
        Ok(object.into())
    }
}

/// A member name, as the property key the object gets.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = PropertyKey;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<PropertyKey, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = PropertyKey;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E>(self, v: &str) -> Result<PropertyKey, E> {
        // "0", "1", ...: an array index key, as the object orders them.
        Ok(JsString::from(v).into())
    }
}

#[cfg(test)]
mod tests {
    use boa_engine::{Context, Source};

    /// Runs `probe` (JS source whose value is a string) in a context with
    /// the native `JSON.parse` and in a stock boa context: the two must
    /// agree.
    fn both(probe: &str) -> (String, String) {
        let run = |ctx: &mut Context| {
            let v = ctx
                .eval(Source::from_bytes(probe))
                .unwrap_or_else(|e| panic!("{probe}: {e}"));
            v.to_string(ctx).unwrap().to_std_string_lossy()
        };
        let mut ours = Context::default();
        super::install(&mut ours).unwrap();
        let mut stock = Context::default();
        (run(&mut ours), run(&mut stock))
    }

    /// What a parse gives, written out so that any difference shows: the
    /// value's JSON, every object's own keys in order, the types, minus
    /// zero, or the error's type and message.
    const DESCRIBE: &str = r#"
        function describe(text) {
            function walk(v) {
                if (v === null || typeof v !== "object") {
                    return typeof v + ":" + (Object.is(v, -0) ? "-0" : String(v));
                }
                var own = Object.getOwnPropertyNames(v);
                return (Array.isArray(v) ? "[" : "{") + own.map(function (k) {
                    var d = Object.getOwnPropertyDescriptor(v, k);
                    var flags = (d.writable ? "w" : "") + (d.enumerable ? "e" : "") + (d.configurable ? "c" : "");
                    return JSON.stringify(k) + "/" + flags + "=" + walk(v[k]);
                }).join(",") + "|" + (Object.getPrototypeOf(v) === (Array.isArray(v) ? Array.prototype : Object.prototype)) + (Array.isArray(v) ? "]" : "}");
            }
            try {
                return walk(JSON.parse(text));
            } catch (e) {
                return e.name + ": " + e.message;
            }
        }
    "#;

    #[test]
    fn agrees_with_boas_own_json_parse() {
        let texts = [
            r#"{"b":1,"a":[true,false,null],"c":{"d":"e"}}"#,
            r#"{"a":1,"b":2,"a":3}"#,
            r#"{"__proto__":{"x":1},"y":2}"#,
            r#"{"2":"two","1":"one","b":"x","0":"zero","4294967295":"big","-1":"neg"}"#,
            r#"[0,-0,-0.0,1.5,-7,2147483647,2147483648,-2147483648,-2147483649]"#,
            r#"[9007199254740993,18446744073709551615,18446744073709551616,1e308,5e-324,1e-400]"#,
            r#"[0.1,0.2,0.30000000000000004,2.2250738585072011e-308,1.7976931348623157e308]"#,
            r#"[123456789012345678901234567890,3.141592653589793238462643383279]"#,
            r#""\u00e9\ud83d\ude00\n\t\"\\\/ é 😀""#,
            r#"{"":"empty","\u0000":"nul","ключ":"значение"}"#,
            "  \n [ ] ",
            "{}",
            "\"\"",
            "true",
            "null",
            "42",
            "[[[[[[[[[[1]]]]]]]]]]",
            // Refused: the same messages as boa's (serde_json's).
            "",
            "{",
            "[1,]",
            r#"{"a":1,}"#,
            "01",
            "1e400",
            "NaN",
            "'single'",
            r#""\ud800""#,
            "[1] x",
            "\"tab\there\"",
            "undefined",
        ];
        for text in texts {
            let probe = format!(
                "{DESCRIBE} describe({})",
                serde_json::to_string(text).unwrap()
            );
            let (ours, stock) = both(&probe);
            assert_eq!(ours, stock, "JSON.parse({text:?})");
        }
    }

    #[test]
    fn nesting_is_refused_where_boas_is() {
        // On a script-sized stack, as the gateway runs scripts: a debug
        // build's frames for 128 levels pass a test thread's 2 MiB.
        std::thread::Builder::new()
            .stack_size(crate::js::SCRIPT_STACK_SIZE)
            .spawn(nesting)
            .unwrap()
            .join()
            .unwrap();
    }

    fn nesting() {
        for depth in [127, 128, 129, 5000] {
            let probe = format!(
                "try {{ JSON.parse('['.repeat({depth}) + ']'.repeat({depth})).length + ' ok' }} catch (e) {{ e.name + ': ' + e.message }}"
            );
            let (ours, stock) = both(&probe);
            assert_eq!(ours, stock, "depth {depth}");
        }
    }

    #[test]
    fn revivers_and_the_functions_own_shape_are_boas() {
        let probes = [
            r#"JSON.stringify(JSON.parse('{"a":1,"b":[2,3]}', function (k, v) { return typeof v === "number" ? v * 10 : v; }))"#,
            r#"JSON.parse.name + "/" + JSON.parse.length + "/" + Object.keys(JSON).length + "/" + (typeof JSON.parse.prototype)"#,
            r#"(function () { try { new JSON.parse("1"); return "constructed"; } catch (e) { return e.name; } })()"#,
            r#"JSON.parse({ toString: function () { return '[1,2]'; } }).length + "/" + JSON.parse(12) + "/" + JSON.parse(true) + "/" + JSON.parse(null)"#,
            r#"(function () { try { JSON.parse(); return "parsed"; } catch (e) { return e.name + ": " + e.message; } })()"#,
            r#"String(JSON.parse('{"k": "v"}').hasOwnProperty("k")) + Object.getOwnPropertyNames(JSON.parse('[1,2]'))"#,
        ];
        for probe in probes {
            let (ours, stock) = both(probe);
            assert_eq!(ours, stock, "{probe}");
        }
    }

    #[test]
    fn thousands_of_parses_in_one_context_stay_right() {
        // Each result is garbage once the next replaces it.
        let mut ctx = Context::default();
        super::install(&mut ctx).unwrap();
        let probe = r#"
            var text = JSON.stringify({message: "hello", path: "/x", headers: {"A": ["b"], "C": ["d", "e"]}, n: [1, 2.5, -3]});
            var last;
            for (var i = 0; i < 5000; i++) { last = JSON.parse(text); }
            JSON.stringify(last) === text
        "#;
        let v = ctx.eval(Source::from_bytes(probe)).unwrap();
        assert_eq!(v.as_boolean(), Some(true));
    }
}
