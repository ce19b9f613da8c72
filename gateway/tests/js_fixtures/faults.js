// One fault per X-Fault value; anything else is a normal pass-through.
var faultsMw = new TykJS.TykMiddleware.NewMiddleware({});
var faultsCalls = 0;
var faultsGetters = 0;
faultsMw.NewProcessRequest(function (request, session, spec) {
    faultsCalls++;
    var fault = (request.Headers["X-Fault"] || [""])[0];
    if (fault === "throw") { throw new Error("boom from js"); }
    // The script's own error, whose text names memory: not the heap limit.
    if (fault === "oom-text") { throw new Error("cache out of memory"); }
    if (fault === "nothing") { return; }
    if (fault === "shape") { return request; }
    if (fault === "number") { request.SetHeaders["X-N"] = 42; }
    if (fault === "getters") {
        // A wrong value, then a getter the host must still run, once.
        request.SetHeaders["X-N"] = 42;
        request.SetHeaders["X-M"] = "m";
        Object.defineProperty(request.SetHeaders, "X-G", {
            enumerable: true,
            configurable: true,
            get: function () { faultsGetters++; return "g"; }
        });
    }
    if (fault === "crlf") { request.SetHeaders["X-Evil"] = "a\r\nX-Injected: 1"; }
    if (fault === "flood") { for (var i = 0; i < 33000; i++) { request.SetHeaders["X-F-" + i] = "1"; } }
    if (fault === "loop") { while (true) {} }
    if (fault === "recurse") { var f = function (n) { return f(n + 1) + 1; }; f(0); }
    if (fault === "alloc") { var keep = []; while (true) { keep.push(new Array(1000).fill(keep.length)); } }
    if (fault === "catchloop") { while (true) { try { while (true) {} } catch (e) {} } }
    if (fault === "callbackloop") { [1].forEach(function () { while (true) {} }); }
    request.SetHeaders["X-Calls"] = String(faultsCalls);
    request.SetHeaders["X-Getters"] = String(faultsGetters);
    return faultsMw.ReturnData(request, {});
});
