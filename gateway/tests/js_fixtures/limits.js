// Hostile scripts for the engine limits, one per X-Fault value.
var limitsMw = new TykJS.TykMiddleware.NewMiddleware({});
limitsMw.NewProcessRequest(function (request, session, spec) {
    var fault = (request.Headers["X-Fault"] || [""])[0];
    if (fault === "regex") {
        // Catastrophic backtracking: 2^30 paths, all inside the regex engine.
        /^(a+)+$/.test("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!");
    }
    if (fault === "foreach") {
        // An endless loop in a callback a native builtin runs.
        [1, 2, 3].forEach(function () { for (;;) {} });
    }
    if (fault === "sort") {
        [3, 1, 2].sort(function () { for (;;) {} });
    }
    if (fault === "alloc") {
        var keep = [];
        for (;;) { keep.push("x".repeat(1024) + keep.length); }
    }
    if (fault === "onestep") {
        // One builtin call asking for ~800 MB at once.
        request.SetHeaders["X-Len"] = String(new Array(1e8).fill(0).length);
    }
    if (fault === "globalalloc") {
        // Allocation kept in a global: only discarding the context frees it.
        globalThis.hoard = [];
        for (;;) { globalThis.hoard.push(new Array(1000).fill(1)); }
    }
    if (fault === "deepjson") {
        var o = {};
        for (var i = 0; i < 100000; i++) { o = { a: o }; }
        request.SetHeaders["X-Json-Length"] = String(JSON.stringify(o).length);
    }
    if (fault === "deepparse") {
        var text = "";
        for (var j = 0; j < 100000; j++) { text += "["; }
        JSON.parse(text);
    }
    if (fault === "recurse") {
        var f = function (n) { return f(n + 1) + 1; };
        f(0);
    }
    if (fault === "catchrecurse") {
        // The RangeError is catchable: the script survives it.
        var g = function (n) { return g(n + 1) + 1; };
        try { g(0); } catch (e) { request.SetHeaders["X-Caught"] = e.name; }
    }
    request.SetHeaders["X-Ok"] = "yes";
    return limitsMw.ReturnData(request, {});
});
