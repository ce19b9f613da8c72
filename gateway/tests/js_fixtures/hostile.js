// What a careless script author (or an attacker's request) does to the JS
// host: one case per X-Case header, depth from X-Depth. Used by
// tests/js_hardening.rs; every case must fail its own request at worst.
var hostileMw = new TykJS.TykMiddleware.NewMiddleware({});

function nestObject(n) {
    var o = 1;
    for (var i = 0; i < n; i++) { o = {a: o}; }
    return o;
}

function nestArray(n) {
    var o = [];
    for (var i = 0; i < n; i++) { o = [o]; }
    return o;
}

// A plausible helper: `a.b.c=1&a.b.d=2` to nested JSON.
function formToJSON(body) {
    var out = {};
    body.split("&").forEach(function (pair) {
        var kv = pair.split("=");
        var keys = kv[0].split(".");
        var o = out;
        for (var i = 0; i < keys.length - 1; i++) {
            if (typeof o[keys[i]] !== "object") { o[keys[i]] = {}; }
            o = o[keys[i]];
        }
        o[keys[keys.length - 1]] = decodeURIComponent(kv[1] || "");
    });
    return JSON.stringify(out);
}

hostileMw.NewProcessRequest(function (request, session, spec) {
    var kase = (request.Headers["X-Case"] || [""])[0];
    var n = parseInt((request.Headers["X-Depth"] || ["0"])[0], 10);
    var out = "";
    if (kase === "stringify") { out = JSON.stringify(nestObject(n)); }
    if (kase === "stringify-array") { out = JSON.stringify(nestArray(n)); }
    if (kase === "string") { out = String(nestArray(n)); }
    if (kase === "tojson") {
        var deep = nestObject(n);
        out = JSON.stringify({toJSON: function () { return deep; }});
    }
    if (kase === "flat") { out = nestArray(n).flat(Infinity); }
    if (kase === "form") {
        request.Body = formToJSON(request.Body);
        out = request.Body;
    }
    if (kase === "parse") { out = JSON.parse(request.Body); }
    if (kase === "throw") { return request.Headers["X-Absent"][0]; }
    if (kase === "regex") { out = /^(a+)+$/.test(new Array(n + 1).join("a") + "!"); }
    if (kase === "foreach") { [1].forEach(function () { while (true) {} }); }
    if (kase === "loop") { while (true) {} }
    request.SetHeaders["X-Len"] = String(out.length);
    return hostileMw.ReturnData(request, {});
});
