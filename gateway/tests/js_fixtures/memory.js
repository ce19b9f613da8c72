// What a script does to its context's heap, one case per X-Case header.
// Used by tests/js_hardening.rs (`--jsvm-memory` on boa). The answer is
// the number the case reports, in the body, so no upstream is involved.
var memoryMw = new TykJS.TykMiddleware.NewMiddleware({});
var kept = [];
var calls = 0;
var registered = 0;

memoryMw.NewProcessRequest(function (request, session, spec) {
    var c = request.Headers["X-Case"] ? request.Headers["X-Case"][0] : "";
    var n = 0;
    if (c === "garbage") {
        // 1 MiB of string held by an object that is garbage after the
        // call: freed only when the collector sweeps the object.
        var o = { s: "x".repeat(1 << 20) + calls };
        n = o.s.length;
    } else if (c === "keep") {
        // 1 MiB a call, kept: the context's live heap grows.
        kept.push("x".repeat(1 << 20) + kept.length);
        n = kept.length;
    } else if (c === "grow") {
        // Grows within one call, 1 KiB a step, without end.
        var a = [];
        for (var i = 0; i < 1e7; i++) { a.push("x".repeat(1024) + i); }
        n = a.length;
    } else if (c === "callback-grow") {
        // Grows inside a callback that a builtin runs (`Array.from` calls
        // it per element): boa yields no slice there, so the slice check
        // never sees it. 1 KiB an element, 400,000 at most (~450 MB: the
        // bound of a gateway that lets it run).
        var b = Array.from({ length: 4e5 }, function (_, i) {
            return "x".repeat(1024) + i;
        });
        n = b.length;
    } else if (c === "huge") {
        // One native step that asks for 200 MB at once.
        n = "x".repeat(2e8).length;
    } else if (c === "huge-block") {
        // One native step that reserves 400 MB at once (`padStart` makes
        // its filler as a vector of UTF-16 units first).
        n = "x".padStart(2e8).length;
    } else if (c === "buffer") {
        // An ArrayBuffer of 300 MB, reserved at once.
        n = new Uint8Array(3e8).length;
    } else if (c === "parse") {
        // A JSON array of X-N zeros, parsed.
        var zeros = Number(request.Headers["X-N"] ? request.Headers["X-N"][0] : 1);
        n = JSON.parse("[" + "0,".repeat(zeros - 1) + "0]").length;
    } else if (c === "stringify") {
        // The JSON of X-N strings of 1 MiB.
        var count = Number(request.Headers["X-N"] ? request.Headers["X-N"][0] : 0);
        n = JSON.stringify(new Array(count).fill("x".repeat(1 << 20))).length;
    } else if (c === "repeat" || c === "join" || c === "join-like") {
        // A string of X-N characters, made the three usual ways (boa's own
        // builtins first made a vector of 16 bytes a character).
        var len = Number(request.Headers["X-N"] ? request.Headers["X-N"][0] : 0);
        var made = c === "repeat" ? "x".repeat(len)
            : c === "join" ? new Array(len + 1).join("x")
            : Array.prototype.join.call({ length: len + 1 }, "x");
        n = made.length;
    } else if (c === "late-grow") {
        // Spins inside a callback for X-Spin ms (past the call's deadline,
        // so that its VM thread is abandoned meanwhile), then grows there
        // as "callback-grow" does.
        var spin = Number(request.Headers["X-Spin"] ? request.Headers["X-Spin"][0] : 0);
        var t0 = Date.now();
        var g = Array.from({ length: 4e5 }, function (_, i) {
            while (i === 0 && Date.now() - t0 < spin) { }
            return "x".repeat(1024) + i;
        });
        n = g.length;
    } else if (c === "late-log") {
        // Spins inside a callback for X-Spin ms (past the deadline), then
        // logs 2,000 lines there.
        var spin2 = Number(request.Headers["X-Spin"] ? request.Headers["X-Spin"][0] : 0);
        var t1 = Date.now();
        [0].forEach(function () {
            while (Date.now() - t1 < spin2) { }
            for (var j = 0; j < 2000; j++) { log("late-log-line " + j); }
        });
    } else if (c === "calls") {
        n = calls;
    } else if (c === "symbols") {
        // 2,000 new registered symbols a call (boa's own registry is one
        // table for the process that nothing ever empties).
        for (var k = 0; k < 2000; k++) {
            Symbol.for("k-" + registered + "-" + k + "-" + "p".repeat(96));
        }
        registered += 1;
        n = registered;
    } else if (c === "symbol-rules") {
        // The registry's rules, as the builtins': 1 when all hold.
        var a = Symbol.for("a");
        var ok = a === Symbol.for("a") && Symbol.keyFor(a) === "a" &&
            Symbol.keyFor(Symbol("a")) === undefined &&
            Symbol.keyFor(Symbol.iterator) === undefined &&
            Symbol.for(1) === Symbol.for("1") && a.description === "a" &&
            Symbol.for.length === 1 && Symbol.for.name === "for" &&
            !Object.keys(Symbol).includes("for");
        var threw = 0;
        try { Symbol.keyFor("a"); } catch (e) { threw += e instanceof TypeError ? 1 : 0; }
        try { Symbol.for(Symbol("x")); } catch (e) { threw += e instanceof TypeError ? 1 : 0; }
        n = ok && threw === 2 ? 1 : 0;
    } else {
        // An ordinary call that changes every part of the request the
        // host copies back (headers, body, URL, query) and throws on PUT.
        calls += 1;
        if (request.Method === "PUT") { throw new Error("no PUT here"); }
        request.SetHeaders["X-Calls"] = String(calls);
        request.SetHeaders["X-Seen"] = Object.keys(request.Headers).join(",");
        request.DeleteHeaders.push("X-Case");
        request.AddParams["calls"] = String(calls);
        request.Body = request.Body + "!";
        request.URL = "/rewritten" + request.URL;
        return memoryMw.ReturnData(request, {});
    }
    request.ReturnOverrides.ResponseCode = 200;
    request.ReturnOverrides.ResponseBody = String(n);
    return memoryMw.ReturnData(request, {});
});
