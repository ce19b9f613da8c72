// Each call ties its request into a cycle through fields the host keeps
// (a container pointing back at the request, an accessor closing over it,
// a key added after), each holding a large string: only the cycle
// collector can free them, so a host that hid the references from it
// would run into the memory limit.
var cyclesMw = new TykJS.TykMiddleware.NewMiddleware({});
cyclesMw.NewProcessRequest(function (request, session, spec) {
    var big = "x".repeat(64 * 1024) + Math.random();
    request.Headers.back = request;
    request.DeleteParams.back = request;
    request.ReturnOverrides.ResponseHeaders.big = big;
    var self = request;
    Object.defineProperty(request, "Params", {
        get: function () { return self; }, enumerable: true, configurable: true
    });
    if (request.Headers["X-Plain"]) {
        request.Extra = {request: request, big: big};
    }
    request.SetHeaders = {"X-Cycle": "yes"};
    return cyclesMw.ReturnData(request, {});
});
