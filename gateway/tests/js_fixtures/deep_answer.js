// An answer whose SessionMeta nests as deep as the request asks (built once
// and kept): the host encodes it to check it as Tyk's decoder would, and
// must fail that request, not overflow its thread's stack.
var deepMw = new TykJS.TykMiddleware.NewMiddleware({});
var deepValue = null;

function deepBuild(levels) {
    var d = {};
    for (var i = 0; i < levels; i++) {
        d = { a: d };
    }
    return d;
}

deepMw.NewProcessRequest(function (request, session) {
    var levels = parseInt((request.Headers["X-Levels"] || ["0"])[0], 10);
    if (levels > 0) {
        if (deepValue === null) {
            deepValue = deepBuild(levels);
        }
        if (request.Headers["X-Throw"]) {
            throw deepValue;
        }
        if (request.Headers["X-Getter"]) {
            // Thrown while the host reads the answer, not during the call.
            return { get Request() { throw deepValue; }, SessionMeta: {} };
        }
        return deepMw.ReturnData(request, deepValue);
    }
    request.SetHeaders["X-Deep"] = "fine";
    return deepMw.ReturnData(request, {});
});
