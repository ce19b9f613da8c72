// A script whose top level changes the builtins before any request (as
// old polyfills do, here deliberately broken), then denies requests that
// carry X-Block. What the host hands it (`request.Headers`, `Params`) must
// not depend on the builtins it changed: on QuickJS the host built the
// headers with the script's own `split`, and the deny rule never saw its
// header (the request was proxied).
var tamperedMw = new TykJS.TykMiddleware.NewMiddleware({});

(function () {
    var split = String.prototype.split;
    var define = Object.defineProperty;
    String.prototype.split = function (sep, limit) {
        return split.call(this, sep === "\n" ? "\r" : sep, limit);
    };
    String.prototype.indexOf = function () { return -1; };
    Array.isArray = function () { return false; };
    Object.defineProperty = function (o, k, d) {
        return k === "Headers" ? o : define(o, k, d);
    };
    Symbol = function () { return "headers"; };
    // A setter every object inherits for the name the deny rule reads: a
    // host writing `h[name] = value` would call it and lose the header.
    define(Object.prototype, "X-Block", { set: function () {}, configurable: true });
    define(Object.prototype, "q", { set: function () {}, configurable: true });
    // Descriptor literals the host made would now have a `get` too.
    define(Object.prototype, "get", {
        value: function () { return "forged"; }, writable: true, configurable: true
    });
})();

tamperedMw.NewProcessRequest(function (request, session) {
    var h = request.Headers;
    var own = function (o, k) { return Object.prototype.hasOwnProperty.call(o, k) ? o[k] : undefined; };
    if (own(h, "X-Block") !== undefined) {
        request.ReturnOverrides.ResponseCode = 403;
        request.ReturnOverrides.ResponseError = "blocked";
    }
    var probe = own(h, "X-Probe");
    request.SetHeaders["X-Seen-Probe"] = probe === undefined ? "none" : probe.join("|");
    var q = own(request.Params, "q");
    request.SetHeaders["X-Seen-Q"] = q === undefined ? "none" : q.join("|");
    return tamperedMw.ReturnData(request, {});
});
