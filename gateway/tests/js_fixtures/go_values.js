// Values where Tyk's decoder wants a string, a map or a list, one case per
// X-Case: what Tyk's transport (JSON.stringify, then Go's encoding/json)
// makes of each is what every engine and strategy must make of it.
var valuesMw = new TykJS.TykMiddleware.NewMiddleware({});
valuesMw.NewProcessRequest(function (request, session, spec) {
    var c = request.Headers["X-Case"][0];
    var meta = {};
    request.SetHeaders["X-Ran"] = c;
    if (c === "url-undefined") {
        request.URL = undefined;
    } else if (c === "url-null") {
        request.URL = null;
    } else if (c === "url-empty") {
        request.URL = "";
    } else if (c === "url-relative") {
        request.URL = "a/b";
    } else if (c === "url-unparseable") {
        request.URL = "http://[::1/x";
    } else if (c === "undefined-header") {
        request.SetHeaders["X-User"] = ({}).id;
    } else if (c === "null-header") {
        request.SetHeaders["X-Null"] = null;
    } else if (c === "nan-header") {
        request.SetHeaders["X-Nan"] = parseInt("x", 10);
    } else if (c === "date-header") {
        request.SetHeaders["X-Date"] = new Date(0);
    } else if (c === "boxed-header") {
        request.SetHeaders["X-Boxed"] = new String("boxed");
    } else if (c === "function-header") {
        request.SetHeaders["X-Fn"] = function () {};
    } else if (c === "hidden-header") {
        Object.defineProperty(request.SetHeaders, "X-Hidden", { value: "h", enumerable: false });
    } else if (c === "regexp-headers") {
        request.SetHeaders = /re/g;
    } else if (c === "number-header") {
        request.SetHeaders["X-Num"] = 5;
    } else if (c === "params") {
        request.AddParams["u"] = undefined;
        request.AddParams["n"] = null;
        request.AddParams["d"] = new Date(0);
        request.ExtendedParams = { e: null, f: undefined, g: ["1", null] };
    } else if (c === "list-items") {
        request.DeleteHeaders = new Proxy(["X-B", undefined, null], {});
    } else if (c === "list-to-json") {
        request.DeleteHeaders = { toJSON: function () { return ["X-B"]; } };
    } else if (c === "proxied-map") {
        request.SetHeaders = new Proxy(["a"], {});
    } else if (c === "no-code-bad-header") {
        request.ReturnOverrides.ResponseCode = 0;
        request.ReturnOverrides.ResponseHeaders = { "X-R": 5 };
    } else if (c === "code-bad-edit") {
        request.ReturnOverrides.ResponseCode = 403;
        request.SetHeaders["X-Num"] = 5;
    } else if (c === "code-null-header") {
        request.ReturnOverrides.ResponseCode = 200;
        request.ReturnOverrides.ResponseBody = "forced";
        request.ReturnOverrides.ResponseHeaders = { "X-R": null, "X-S": undefined, "X-D": new Date(0) };
    } else if (c === "nan-code") {
        request.ReturnOverrides.ResponseCode = NaN;
    } else if (c === "number-ignore-body") {
        request.IgnoreBody = 1;
    } else if (c === "null-ignore-body") {
        request.Body = "replaced";
        request.IgnoreBody = null;
    } else if (c === "to-json-ignore-body") {
        request.Body = "replaced";
        request.IgnoreBody = { toJSON: function () { return null; } };
    } else if (c === "boxed-ignore-body") {
        request.Body = "replaced";
        request.IgnoreBody = new Boolean(true);
    } else if (c === "string-override-error") {
        request.ReturnOverrides.ResponseCode = 403;
        request.ReturnOverrides.OverrideError = "yes";
    } else if (c === "date-meta") {
        meta = new Date(0);
    }
    return valuesMw.ReturnData(request, meta);
});
