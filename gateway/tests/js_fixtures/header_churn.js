// SetHeaders call after call: constant values and names, values and names
// new every call, values too long to keep, many headers at once, bad names
// and values, a kept container written after its call, ProcessRequest
// replaced between calls. What the host keeps from call to call (names,
// values, containers) must never show in another call's answer.
var churnMw = new TykJS.TykMiddleware.NewMiddleware({});
var churnCalls = 0;
var churnKept = null;
function churnFirst(request, session, spec) {
    churnCalls++;
    var n = churnCalls;
    var mode = (request.Headers["X-Mode"] || [""])[0];
    if (churnKept !== null) {
        // The last call's container, written after its answer was read.
        churnKept["X-Stale"] = "from-an-old-call";
    }
    churnKept = request.SetHeaders;
    if (mode === "throw") { throw new Error("churn throws at " + n); }
    if (mode === "bad-name") { request.SetHeaders["Bad Name"] = "v"; }
    if (mode === "bad-value") { request.SetHeaders["X-Bad"] = "a\u0001b"; }
    if (mode === "non-ascii") {
        request.SetHeaders["X-Bad"] = "caf\u00e9";
        request.SetHeaders["X-Wide"] = "snow \u2603";
    }
    if (mode === "many") {
        for (var i = 0; i < 3000; i++) { request.SetHeaders["X-Many-" + i] = "m" + i; }
    }
    if (mode === "deep") {
        var d = {};
        for (var j = 0; j < 100000; j++) { d = { a: d }; }
        request.SetHeaders["X-Count"] = "n" + n;
        return churnMw.ReturnData(request, d);
    }
    if (mode === "swap") { churnMw.NewProcessRequest(churnSecond); }
    if (mode === "break") { churnMw.ProcessRequest = 42; }
    request.SetHeaders["X-Const"] = "same-every-call";
    request.SetHeaders["X-Count"] = "n" + n;
    request.SetHeaders["X-Long"] = new Array(100).join("ab" + n);
    request.SetHeaders["X-Name-" + (n % 50)] = "v" + n;
    return churnMw.ReturnData(request, {});
}
function churnSecond(request, session, spec) {
    churnCalls++;
    request.SetHeaders["X-Which"] = "second";
    request.SetHeaders["X-Count"] = "n" + churnCalls;
    churnMw.NewProcessRequest(churnFirst);
    return churnMw.ReturnData(request, {});
}
churnMw.NewProcessRequest(churnFirst);
