// Counts its calls in a global and, when asked (X-Spin: <ms>), busy-waits
// that long first: a call that overruns QuickJS's inline budget.
var spinCounter = new TykJS.TykMiddleware.NewMiddleware({});
var calls = 0;

spinCounter.NewProcessRequest(function(request, session) {
    calls += 1;
    var spin = request.Headers["X-Spin"];
    var ms = spin ? parseInt(spin[0], 10) : 0;
    if (ms > 0) {
        var end = Date.now() + ms;
        while (Date.now() < end) {}
    }
    request.SetHeaders["X-Calls"] = String(calls);
    return spinCounter.ReturnData(request, {});
});
