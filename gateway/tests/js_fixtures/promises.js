// Promise jobs a call queues, chosen by X-Mode. `reactions` counts the
// `.then` reactions and `await` continuations that ran: they run once the
// host has read the call's answer (as Tyk's goja runs its job queue when a
// call returns), so the next call of a persistent context sees them, and
// they cannot change the answer.
var promisesMw = new TykJS.TykMiddleware.NewMiddleware({});
var calls = 0;
var reactions = 0;

promisesMw.NewProcessRequest(function (request, session) {
    var mode = (request.Headers["X-Mode"] || ["count"])[0];
    calls++;
    request.SetHeaders["X-Calls"] = String(calls);
    request.SetHeaders["X-Reactions"] = String(reactions);
    Promise.resolve().then(function () { reactions++; });
    (async function () { await null; reactions++; })();
    if (mode === "late-edit") {
        // Runs after the answer was read: neither edit is applied.
        Promise.resolve().then(function () {
            request.SetHeaders["X-Late"] = "1";
            request.ReturnOverrides.ResponseCode = 403;
        });
    } else if (mode === "forever") {
        // Each job queues the next: only the deadline ends it.
        var again = function () { Promise.resolve().then(again); };
        again();
    } else if (mode === "capture") {
        // A reaction holding 256 KiB: kept while it is queued.
        var big = "x".repeat(1 << 18) + calls;
        Promise.resolve().then(function () { return big.length; });
    } else if (mode === "weak") {
        // A WeakRef's target is kept alive only until the call ends.
        new WeakRef({ big: "y".repeat(1 << 18) + calls }).deref();
    } else if (mode === "throw") {
        throw new Error("thrown with jobs queued");
    }
    if (request.Headers["X-Answer"] !== undefined) {
        // The count as the answer (the gateway's tests read it).
        request.ReturnOverrides.ResponseCode = 200;
        request.ReturnOverrides.ResponseBody = String(calls);
    }
    return promisesMw.ReturnData(request, {});
});
