// Random answers, drawn from the request's X-Seed with a PRNG of our own
// (mulberry32), so every engine and strategy builds the same answer for
// the same seed. They aim at what Tyk's transport (JSON.stringify, then
// Go's decoder) makes of a value where it wants a string, a map or a list:
// undefined, null, NaN, functions, Symbols, Dates and other toJSON
// objects, String objects, non-enumerable and throwing properties, Proxies,
// arrays where maps belong. Only the fields the host reads are touched,
// and toJSON objects go only where a string belongs (a toJSON on a
// container is not called outside `tyk-json`: see gostring.rs).
var fuzzMw = new TykJS.TykMiddleware.NewMiddleware({});
fuzzMw.NewProcessRequest(function (request, session, spec) {
    if (request.Headers["X-Seed"][0] === "plain") {
        request.SetHeaders["X-Fuzz"] = "plain";
        return fuzzMw.ReturnData(request, {});
    }
    var s = parseInt((request.Headers["X-Seed"] || ["1"])[0], 10) >>> 0;
    function rnd() {
        s = (s + 0x6D2B79F5) >>> 0;
        var t = s;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    }
    function pick(a) { return a[Math.floor(rnd() * a.length)]; }
    function chance(p) { return rnd() < p; }
    var STRS = ["", "a", "v a l", "X-Foo", "\u00e9", "\ud83d\ude00", "a=b&c", "/", "%2F", "200",
                "chunked", " lead", "trail ", "z".repeat(300), "x\ny", "\u0000"];
    var NUMS = [0, -0, 1, -1, 200, 3.5, NaN, Infinity, -Infinity, 1e21];
    var KEYS = ["X-A", "x-a", "X-B", "Content-Type", "Host", "Connection", "", "X Bad", "\u00e9",
                "a", "q", "0", "1", "constructor", "length"];
    function thrower() {
        var o = {};
        Object.defineProperty(o, "x", { get: function () { throw new Error("getter"); }, enumerable: true });
        return o;
    }
    function toJson() {
        var r = pick(["key", null, undefined, 5, "t", new String("boxed")]);
        return { toJSON: function (k) { return r === "key" ? k : r; } };
    }
    // A value where Tyk wants a Go string.
    function value() {
        switch (Math.floor(rnd() * 17)) {
            case 0: return undefined;
            case 1: return null;
            case 2: return chance(0.5);
            case 3: return pick(NUMS);
            case 4: case 5: case 6: return pick(STRS);
            case 7: return new Date(0);
            case 8: return new String(pick(STRS));
            case 9: return toJson();
            case 10: return function () {};
            case 11: return Symbol("s");
            case 12: return [pick(STRS)];
            case 13: return { a: "b" };
            case 14: return 10n;
            case 15: return thrower();
            default: return new Number(5);
        }
    }
    function map() {
        var o = {}, n = Math.floor(rnd() * 4);
        for (var i = 0; i < n; i++) {
            if (chance(0.15)) {
                Object.defineProperty(o, pick(KEYS), { value: value(), enumerable: false, configurable: true, writable: true });
            } else {
                o[pick(KEYS)] = value();
            }
        }
        return o;
    }
    function list() {
        var a = [], n = Math.floor(rnd() * 4);
        for (var i = 0; i < n; i++) a.push(value());
        return a;
    }
    // A value where Tyk wants a map or a list.
    function container(kind) {
        switch (Math.floor(rnd() * 12)) {
            case 0: return undefined;
            case 1: return null;
            case 2: return NaN;
            case 3: return function () {};
            case 4: return pick([5, "x", true]);
            case 5: return /re/g;
            case 6: return new Proxy(kind === "map" ? map() : list(), {});
            case 7: return kind === "map" ? list() : map();
            default: return kind === "map" ? map() : list();
        }
    }
    var edits = {
        SetHeaders: function () {
            if (chance(0.5)) request.SetHeaders[pick(KEYS)] = value(); else request.SetHeaders = container("map");
        },
        AddParams: function () {
            if (chance(0.5)) request.AddParams[pick(KEYS)] = value(); else request.AddParams = container("map");
        },
        DeleteHeaders: function () {
            if (chance(0.5)) request.DeleteHeaders.push(value()); else request.DeleteHeaders = container("list");
        },
        DeleteParams: function () {
            if (chance(0.5)) request.DeleteParams.push(value()); else request.DeleteParams = container("list");
        },
        ExtendedParams: function () {
            var o = {};
            o[pick(KEYS)] = chance(0.6) ? container("list") : value();
            request.ExtendedParams = chance(0.8) ? o : container("map");
        },
        Body: function () {
            request.Body = pick([undefined, null, 5, true, "new body", new String("boxed"), { a: "b" }, [1, 2]]);
        },
        URL: function () {
            request.URL = pick([undefined, null, 5, "/p/other?k=v", "/p/a?x=1&y=2", "no-slash", "http://host/abs?q=1"]);
        },
        IgnoreBody: function () {
            request.IgnoreBody = chance(0.3) ? value() : pick([true, false, 0, 1, "", "x", null, undefined]);
        },
        ReturnOverrides: function () {
            var ro = request.ReturnOverrides;
            var code = pick([0, -0, 200, 201, 204, 302, 403, 418, 101, 99, 1000, 200.5, NaN, null,
                             undefined, "200", function () {}]);
            if (chance(0.3)) {
                ro.ResponseHeaders[pick(KEYS)] = value();
            } else if (chance(0.3)) {
                ro.ResponseHeaders = container("map");
            }
            if (chance(0.5)) ro.ResponseError = value();
            if (chance(0.5)) ro.ResponseBody = value();
            if (chance(0.3)) ro.OverrideError = chance(0.3) ? value() : pick([true, false, 0, 1, "", "x", null]);
            ro.ResponseCode = code;
        }
    };
    var names = Object.keys(edits), n = 1 + Math.floor(rnd() * 4);
    for (var i = 0; i < n; i++) edits[pick(names)]();
    var meta = pick([{}, {}, {}, { a: "b" }, { a: 1 }, { a: null }, "str", null, undefined, new Date(0),
                     Object.create(null), { a: undefined }, { a: new Date(0) }]);
    var shape = rnd();
    if (shape < 0.85) return fuzzMw.ReturnData(request, meta);
    if (shape < 0.92) return { Request: request };
    return request;
});
