// Top-level code that makes ~96 MiB of strings inside a callback (no
// slice) and keeps none of them, then a middleware that answers "built".
// Used by tests/js_hardening.rs: a context's build is bounded by the
// load-time check, not by a call's ceiling.
[0].forEach(function () {
    var s = "x";
    for (var i = 0; i < 26; i++) { s = s + s; }
});
var buildMw = new TykJS.TykMiddleware.NewMiddleware({});
buildMw.NewProcessRequest(function (request, session, spec) {
    request.ReturnOverrides.ResponseCode = 200;
    request.ReturnOverrides.ResponseBody = "built";
    return buildMw.ReturnData(request, {});
});
