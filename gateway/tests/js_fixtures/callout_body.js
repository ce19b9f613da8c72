// Calls out with a body of the size X-Size asks for (decimal bytes):
// TykMakeHttpRequest, or with X-How: batch a TykBatchRequest of two
// requests sharing the size. The host bounds what a script sends at
// 32 MiB (js_callout_bodies.rs). X-Reply tells the upstream whether the
// call answered.

// n bytes of "b" by doubling (boa's "b".repeat(n) first makes a vector of
// n 16-byte slices).
function sized(n) {
    var out = "";
    var piece = "b";
    while (n > 0) {
        if (n % 2 === 1) {
            out += piece;
        }
        n = Math.floor(n / 2);
        if (n > 0) {
            piece += piece;
        }
    }
    return out;
}

var callout = new TykJS.TykMiddleware.NewMiddleware({});
callout.NewProcessRequest(function (request, session, spec) {
    var n = parseInt(request.Headers["X-Size"][0], 10);
    var how = (request.Headers["X-How"] || ["single"])[0];
    var to = spec.config_data.upstream;
    var reply;
    if (how === "batch") {
        var first = Math.floor(n / 2);
        reply = TykBatchRequest(JSON.stringify({
            requests: [
                {method: "POST", relative_url: to + "/batch-a", headers: {}, body: sized(first)},
                {method: "POST", relative_url: to + "/batch-b", headers: {}, body: sized(n - first)}
            ],
            suppress_parallel_execution: true
        }));
    } else {
        reply = TykMakeHttpRequest(JSON.stringify({
            Method: "POST",
            Domain: to,
            Resource: "/single",
            Headers: {},
            Body: sized(n)
        }));
    }
    request.SetHeaders["X-Reply"] = reply === undefined ? "undefined" : "answered";
    return callout.ReturnData(request, {});
});
