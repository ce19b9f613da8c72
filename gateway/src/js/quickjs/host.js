// The QuickJS host's side of a call. It runs inside a function that has
// defined `spec` (this API's spec object), and that function runs once per
// context after the TykJS prelude and before the API's scripts: what it
// takes from the builtins (below) is taken before any script could change
// them. It returns `host`, which the context's build calls after the
// scripts with `dispatch` (one function per middleware entry, calling
// `<name>.ProcessRequest(request, {}, spec)`); `host` returns `call`, what
// the host runs per request. Nothing here is global: scripts can neither
// see nor replace it.
//
// `headers` is "Name\nvalues\nName\nvalues..." with canonical names, each
// name once, its values joined by "\0" (neither character can occur in an
// HTTP header). `params` is null (no query) or [name, [values], ...]. One
// string and one split are cheaper than a property write per header from the
// host.
//
// `request.Headers` (and a response entry's `response.Headers`) is built
// from that string only when a script first reads it (`lazyHeaders`):
// building it (a split, an array and a property per header, each name made
// an atom) was a third of a call that never reads it, as the seed's does not.

// The builtins the host uses, as they were before the scripts ran. A
// script may replace `String.prototype.split`, `Array.isArray` or
// `Object.defineProperty` (polyfills do), or give `Object.prototype` a
// setter: what it is handed must not change with them (QuickJS built
// `request.Headers` with the script's `split`, and a script whose top level
// had replaced it no longer saw the header its deny rule read). Methods are
// taken uncurried (`split(text, sep)`), so `Function.prototype.call` is not
// looked up either.
var uncurry = Function.prototype.bind.bind(Function.prototype.call);
var split = uncurry(String.prototype.split);
var indexOf = uncurry(String.prototype.indexOf);
var isArray = Array.isArray;
var defineProperty = Object.defineProperty;
var create = Object.create;
var setPrototypeOf = Object.setPrototypeOf;
var objectPrototype = Object.prototype;

// The request's header text, until `Headers` is read. A symbol key: not in
// `Object.keys`, `for..in` or `JSON.stringify`, only in
// `Object.getOwnPropertySymbols`.
var PENDING = Symbol("headers");

// A data descriptor without a prototype (one inherited `get` would make
// every descriptor an accessor's), reused: `value` is set for one
// definition and cleared after it.
var DATA = create(null);
DATA.writable = true;
DATA.enumerable = true;
DATA.configurable = true;

function define(obj, key, value) {
    DATA.value = value;
    try {
        defineProperty(obj, key, DATA);
    } finally {
        DATA.value = undefined;
    }
}

// The object of `pairs` ([name, value, name, value...]) as a plain
// object: built without a prototype, so a setter the script gave
// `Object.prototype` (or the `__proto__` accessor) is never called for a
// name, then given the prototype a `{}` has. (`lines` does the same.)
function plainOf(pairs) {
    var o = create(null);
    for (var k = 0; k + 1 < pairs.length; k += 2) {
        o[pairs[k]] = pairs[k + 1];
    }
    return setPrototypeOf(o, objectPrototype);
}

// `request.Headers` as an accessor, in its place among the fields (turning
// the `Headers: null` of the literal into one keeps the order): the first
// read builds the object and leaves it as a plain data property, as if it
// had been there all along; a write before any read does the same with the
// written value. So reads, writes, `delete`, `in`, `Object.keys`, spreading
// and `JSON.stringify` see what they would on Tyk's JSON-decoded object.
// What differs: `Object.getOwnPropertyDescriptor` shows the accessor until
// the first read, and on a frozen request (or response) each read builds a
// new object.
// The descriptor and its functions are made once per context, not per call.
var lazyHeaders = create(null);
lazyHeaders.get = function () { return settle(this, "Headers", lines(this[PENDING])); };
lazyHeaders.set = function (v) { settle(this, "Headers", v); };
lazyHeaders.enumerable = true;
lazyHeaders.configurable = true;

function settle(obj, key, value) {
    try {
        define(obj, key, value);
    } catch (e) {
        // A frozen or sealed request: leave it as it is.
    }
    return value;
}

function lines(headers) {
    var h = create(null);
    if (headers !== "") {
        var parts = split(headers, "\n");
        for (var j = 0; j + 1 < parts.length; j += 2) {
            var v = parts[j + 1];
            h[parts[j]] = indexOf(v, "\0") < 0 ? [v] : split(v, "\0");
        }
    }
    return setPrototypeOf(h, objectPrototype);
}

// A response entry's answer, read here where property names are compiled
// atoms: [Response, StatusCode, Body, DeleteHeaders, SetHeaders], or [ret]
// when the shape is wrong. (A request's answer the host reads itself.)
function answerResponse(ret) {
    var r = ret === null || typeof ret !== "object" ? undefined : ret.Response;
    // Not an array: Go's decoder refuses one for Tyk's struct.
    if (r === null || typeof r !== "object" || isArray(r)) {
        return [ret];
    }
    return [r, r.StatusCode, r.Body, empty(r.DeleteHeaders), r.SetHeaders];
}

function empty(list) {
    return isArray(list) && list.length === 0 ? null : list;
}

function host(dispatch) {
    // `extra` picks the phase of entry `i`: undefined for the request
    // phase; a string for a virtual endpoint (the request as JSON, which
    // the endpoint's dispatch parses, as Tyk hands it over); [status, body,
    // headers] (headers as above) for a response entry, whose request has
    // a null Body, as Tyk's.
    function call(i, method, url, uri, body, headers, params, extra) {
        if (typeof extra === "string") {
            return dispatch[i](null, spec, extra);
        }
        // Tyk's MiniRequestObject, fields in Tyk's order.
        var request = {
            Headers: null,
            SetHeaders: {},
            DeleteHeaders: [],
            Body: body,
            URL: url,
            Params: plainOf(params === null ? [] : params),
            AddParams: {},
            ExtendedParams: {},
            DeleteParams: [],
            ReturnOverrides: {
                ResponseCode: 0,
                ResponseError: "",
                ResponseBody: "",
                ResponseHeaders: {},
                OverrideError: false
            },
            IgnoreBody: false,
            Method: method,
            RequestURI: uri,
            Scheme: "http",
            [PENDING]: headers
        };
        defineProperty(request, "Headers", lazyHeaders);
        if (extra !== undefined) {
            request.Body = null;
            // `Headers` on first read, as the request's (most hooks never
            // read the upstream's headers).
            var response = {
                StatusCode: extra[0],
                Body: extra[1],
                Headers: null,
                SetHeaders: {},
                DeleteHeaders: [],
                [PENDING]: extra[2]
            };
            defineProperty(response, "Headers", lazyHeaders);
            return answerResponse(dispatch[i](request, spec, response));
        }
        // The host reads the answer itself (`answer.rs`, with atoms made once).
        return dispatch[i](request, spec);
    }

    // A `persistent` context's request is one native object whose fields
    // the host keeps (`request.rs`); the host calls the entry's
    // `ProcessRequest(request, {}, spec)` itself (on `dispatch.objects[i]`;
    // through `dispatch[i]` where there is no object), and `make` builds a
    // container it holds unmade when a script first reads it: field 0
    // `Headers` from the header text, 5 `Params` from the query pairs (or
    // null), 9 `ReturnOverrides`. Defined, not assigned: an inherited
    // setter of the same name is not called.
    define(call, "dispatch", dispatch);
    define(call, "spec", spec);
    define(call, "make", function (field, data) {
        if (field === 0) {
            return lines(data);
        }
        if (field === 5) {
            return plainOf(data === null ? [] : data);
        }
        return {
            ResponseCode: 0,
            ResponseError: "",
            ResponseBody: "",
            ResponseHeaders: {},
            OverrideError: false
        };
    });
    return call;
}
