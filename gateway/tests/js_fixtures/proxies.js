// Proxies: what a script sees of them (each line the same on every
// engine), and a chain a million deep, which must fail its request only.
var proxyMw = new TykJS.TykMiddleware.NewMiddleware({});

function proxyFacts() {
    var out = [];
    function t(name, f) {
        try { out.push(name + "=" + f()); } catch (e) { out.push(name + "!" + e.name); }
    }
    t("empty", function () { return new Proxy({a: 1}, {}).a; });
    t("keys", function () { return Object.keys(new Proxy({a: 1, b: 2}, {})).join(","); });
    t("get", function () {
        return new Proxy({}, {get: function (o, k, r) { return String(k).toUpperCase() + (this.tag || ""); }, tag: "!"}).abc;
    });
    t("has", function () { return ("q" in new Proxy({}, {has: function () { return true; }})); });
    t("ownKeys", function () { return Object.keys(new Proxy({x: 1, y: 2}, {ownKeys: function () { return ["y"]; }})).join(","); });
    t("set", function () { var seen = []; var p = new Proxy({}, {set: function (o, k, v) { seen.push(k + v); o[k] = v; return true; }}); p.n = 3; return seen.join() + p.n; });
    t("delete", function () { var o = {d: 1}; delete new Proxy(o, {})["d"]; return "d" in o; });
    t("apply", function () { return new Proxy(function (a) { return a + 1; }, {apply: function (f, th, args) { return f(args[0]) * 10; }})(4); });
    t("call", function () { return new Proxy(function (a) { return a + 1; }, {})(4); });
    t("construct", function () { function C(v) { this.v = v; } return new (new Proxy(C, {}))(7).v; });
    t("proto", function () { return Object.getPrototypeOf(new Proxy([], {})) === Array.prototype; });
    t("inherit", function () { return Object.create(new Proxy({z: 5}, {})).z; });
    t("isArray", function () { return Array.isArray(new Proxy([], {})); });
    t("json", function () { return JSON.stringify(new Proxy({j: [1]}, {})); });
    t("nested", function () { return new Proxy(new Proxy({w: 2}, {}), {}).w; });
    t("revoked", function () { var r = Proxy.revocable({a: 1}, {}); var before = r.proxy.a; r.revoke(); return before + "," + r.proxy.a; });
    t("badTrap", function () { return new Proxy({}, {get: 5}).x; });
    t("badHandler", function () { return new Proxy({}, 5); });
    t("noNew", function () { return Proxy({}, {}); });
    t("invariant", function () {
        var o = {}; Object.defineProperty(o, "c", {value: 1, writable: false, configurable: false});
        return new Proxy(o, {get: function () { return 2; }}).c;
    });
    t("length", function () { return Proxy.length + typeof Proxy.revocable; });
    return out.join(";");
}

proxyMw.NewProcessRequest(function (request, session) {
    var mode = (request.Headers["X-Mode"] || [""])[0];
    if (mode === "chain") {
        var p = {x: 1};
        for (var i = 0; i < 1000000; i++) {
            p = new Proxy(p, {});
        }
        request.SetHeaders["X-Chain"] = String(p.x);
    } else {
        request.SetHeaders["X-Facts"] = proxyFacts();
    }
    return proxyMw.ReturnData(request, {});
});
