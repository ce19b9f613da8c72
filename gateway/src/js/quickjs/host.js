// The QuickJS host's side of a call, evaluated once per context after the
// TykJS prelude and the API's scripts. It runs inside a function that has
// defined `spec` (this API's spec object) and `dispatch` (one function per
// middleware entry, calling `<name>.ProcessRequest(request, {}, spec)`), and
// its `call` is what the host runs per request. Nothing here is global:
// scripts can neither see nor replace it.
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
function own(obj, key, value) {
    // `obj[key] = value` would call Object.prototype's __proto__ setter.
    if (key === "__proto__") {
        Object.defineProperty(obj, key, {
            value: value, writable: true, enumerable: true, configurable: true
        });
    } else {
        obj[key] = value;
    }
}

// `extra` picks the phase of entry `i`: undefined for the request phase; a
// string for a virtual endpoint (the request as JSON, which the endpoint's
// dispatch parses, as Tyk hands it over); [status, body, headers] (headers
// as above) for a response entry, whose request has a null Body, as Tyk's.
function call(i, method, url, uri, body, headers, params, extra) {
    if (typeof extra === "string") {
        return dispatch[i](null, spec, extra);
    }
    var p = {};
    if (params !== null) {
        for (var k = 0; k + 1 < params.length; k += 2) {
            own(p, params[k], params[k + 1]);
        }
    }
    // Tyk's MiniRequestObject, fields in Tyk's order.
    var request = {
        Headers: null,
        SetHeaders: {},
        DeleteHeaders: [],
        Body: body,
        URL: url,
        Params: p,
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
    Object.defineProperty(request, "Headers", lazyHeaders);
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
        Object.defineProperty(response, "Headers", lazyHeaders);
        return answerResponse(dispatch[i](request, spec, response));
    }
    // The host reads the answer itself (`answer.rs`, with atoms made once).
    return dispatch[i](request, spec);
}

// A `persistent` context's request is one native object whose fields the
// host keeps (`request.rs`); the host calls the entry's
// `ProcessRequest(request, {}, spec)` itself (on `dispatch.objects[i]`;
// through `dispatch[i]` where there is no object), and `make` builds a
// container it holds unmade when a script first reads it: field 0
// `Headers` from the header text, 5 `Params` from the query pairs (or
// null), 9 `ReturnOverrides`.
call.dispatch = dispatch;
call.spec = spec;
call.make = function (field, data) {
    if (field === 0) {
        return lines(data);
    }
    if (field === 5) {
        var p = {};
        if (data !== null) {
            for (var k = 0; k + 1 < data.length; k += 2) {
                own(p, data[k], data[k + 1]);
            }
        }
        return p;
    }
    return {
        ResponseCode: 0,
        ResponseError: "",
        ResponseBody: "",
        ResponseHeaders: {},
        OverrideError: false
    };
};

// The request's header text, until `Headers` is read. A symbol key: not in
// `Object.keys`, `for..in` or `JSON.stringify`, only in
// `Object.getOwnPropertySymbols`.
var PENDING = Symbol("headers");

// `request.Headers` as an accessor, in its place among the fields (turning
// the `Headers: null` of the literal into one keeps the order): the first
// read builds the object and leaves it as a plain data property, as if it
// had been there all along; a write before any read does the same with the
// written value. So reads, writes, `delete`, `in`, `Object.keys`, spreading
// and `JSON.stringify` see what they would on Tyk's JSON-decoded object.
// What differs: `Object.getOwnPropertyDescriptor` shows the accessor until
// the first read, and on a frozen request (or response) each read builds a
// new object.
// The descriptor's functions are made once per context, not per call.
var lazyHeaders = {
    get: function () { return settle(this, "Headers", lines(this[PENDING])); },
    set: function (v) { settle(this, "Headers", v); },
    enumerable: true,
    configurable: true
};

function settle(obj, key, value) {
    try {
        Object.defineProperty(obj, key, {
            value: value, writable: true, enumerable: true, configurable: true
        });
    } catch (e) {
        // A frozen or sealed request: leave it as it is.
    }
    return value;
}

function lines(headers) {
    var h = {};
    if (headers !== "") {
        var parts = headers.split("\n");
        for (var j = 0; j + 1 < parts.length; j += 2) {
            var v = parts[j + 1];
            own(h, parts[j], v.indexOf("\0") < 0 ? [v] : v.split("\0"));
        }
    }
    return h;
}

// A response entry's answer, read here where property names are compiled
// atoms: [Response, StatusCode, Body, DeleteHeaders, SetHeaders], or [ret]
// when the shape is wrong. (A request's answer the host reads itself.)
function answerResponse(ret) {
    var r = ret === null || typeof ret !== "object" ? undefined : ret.Response;
    if (r === null || typeof r !== "object") {
        return [ret];
    }
    return [r, r.StatusCode, r.Body, empty(r.DeleteHeaders), r.SetHeaders];
}

function empty(list) {
    return Array.isArray(list) && list.length === 0 ? null : list;
}
