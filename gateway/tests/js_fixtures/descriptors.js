// `request` keeps an ordinary object's rules when a script reaches past
// plain reads and writes: accessors it defines, attributes it changes,
// keys it adds or deletes, freezing, sealing, Proxies, copies. (QuickJS's
// persistent host keeps the fields in native slots: `quickjs/request.rs`.)
// Each mode (header X-Mode) reports failed checks in X-Failed.
var kept = null;
var descMw = new TykJS.TykMiddleware.NewMiddleware({});
var FIELDS = ["Headers", "SetHeaders", "DeleteHeaders", "Body", "URL", "Params", "AddParams",
    "ExtendedParams", "DeleteParams", "ReturnOverrides", "IgnoreBody", "Method", "RequestURI",
    "Scheme"];
var keptUnread = null;
descMw.NewProcessRequest(function (request, session, spec) {
    // Requests kept before their Headers is read (chosen by the path): a
    // later read shows the headers as this call got them, not as its
    // answer changed them, also when the call threw.
    var path = request.URL.split("?")[0];
    if (path === "/desc/keep-unread" || path === "/desc/keep-throw") {
        keptUnread = request;
        request.SetHeaders["X-Added-Later"] = "1";
        request.DeleteHeaders.push("X-Probe");
        if (path === "/desc/keep-throw") throw new Error("kept, then threw");
        return descMw.ReturnData(request, {});
    }
    if (path === "/desc/reuse-unread") {
        var h = keptUnread.Headers;
        request.SetHeaders["X-Kept-Headers"] = Object.keys(h).sort().join() + "=" + h["X-Probe"][0];
        return descMw.ReturnData(request, {});
    }
    var mode = request.Headers["X-Mode"][0];
    var exact = request.Headers["X-Engine"][0] !== "boa";
    var failed = [];
    function check(name, ok) { if (!ok) failed.push(name); }
    function keys(o) { return Object.keys(o).join(); }
    function throwsType(f) {
        try { f(); return false; } catch (e) { return e instanceof TypeError; }
    }
    var out = request;
    var report = null; // where X-Failed goes when not request.SetHeaders
    if (mode === "accessors") {
        var sh = {"X-Got": "yes"};
        var reads = 0;
        Object.defineProperty(request, "SetHeaders", {
            get: function () { reads++; return sh; }, enumerable: true, configurable: true
        });
        var stored = "";
        Object.defineProperty(request, "Body", {
            get: function () { return stored; },
            set: function (v) { stored = String(v).toUpperCase(); }
        });
        request.Body = "shout";
        check("getter", request.Body === "SHOUT" && reads === 0);
        check("keys", keys(request) === FIELDS.join());
        var d = Object.getOwnPropertyDescriptor(request, "Body");
        check("descriptor", typeof d.get === "function" && typeof d.set === "function" &&
            d.enumerable === true && d.configurable === true && !("value" in d));
        check("json", JSON.parse(JSON.stringify(request)).Body === "SHOUT");
        report = sh;
    } else if (mode === "attributes") {
        Object.defineProperty(request, "Method", {enumerable: false});
        check("hidden", keys(request).indexOf("Method") < 0 && Object.keys(request).length === 13 &&
            request.Method === "GET" && "Method" in request &&
            !request.propertyIsEnumerable("Method") &&
            JSON.stringify(request).indexOf('"Method"') < 0);
        var forIn = [];
        for (var k in request) forIn.push(k);
        check("for-in", forIn.length === 13 && forIn.indexOf("Method") < 0);
        Object.defineProperty(request, "URL", {writable: false});
        request.URL = "/lost";
        check("read-only", request.URL === "/desc/p");
        check("read-only-strict", throwsType(function () { "use strict"; request.URL = "/x"; }));
        Object.defineProperty(request, "Scheme", {configurable: false, writable: false});
        check("no-delete", delete request.Scheme === false && request.Scheme === "http");
        check("no-delete-strict", throwsType(function () { "use strict"; delete request.Scheme; }));
        check("no-reconfigure", throwsType(function () {
            Object.defineProperty(request, "Scheme", {configurable: true});
        }));
        check("no-revalue", throwsType(function () {
            Object.defineProperty(request, "Scheme", {value: "https"});
        }));
        Object.defineProperty(request, "Scheme", {value: "http"});
        check("same-value", Reflect.defineProperty(request, "Scheme", {value: "https"}) === false);
        var d = Object.getOwnPropertyDescriptor(request, "Scheme");
        check("descriptor", d.value === "http" && !d.writable && d.enumerable && !d.configurable);
        request.SetHeaders["X-Attributes"] = "yes";
    } else if (mode === "add") {
        request.Extra = 1;
        request[Symbol.for("tag")] = 2;
        request[0] = "zero";
        check("keys", keys(request) === ["0"].concat(FIELDS, ["Extra"]).join());
        check("symbol", Reflect.ownKeys(request).pop() === Symbol.for("tag"));
        check("headers", request.Headers["X-Mode"][0] === "add");
        var j = JSON.parse(JSON.stringify(request));
        check("json", j.Extra === 1 && j["0"] === "zero" && j.Method === "GET");
        request.SetHeaders["X-Added"] = "yes";
    } else if (mode === "readd") {
        delete request.Body;
        check("gone", !("Body" in request) && request.Body === undefined);
        request.Body = "moved";
        check("last", Object.keys(request).pop() === "Body" && Object.keys(request).length === 14);
        request.SetHeaders["X-Readded"] = "yes";
    } else if (mode === "seal") {
        Object.seal(request);
        request.Extra = 1;
        check("sealed", Object.isSealed(request) && !Object.isFrozen(request) &&
            !("Extra" in request) && delete request.Params === false);
        check("add-strict", throwsType(function () { "use strict"; request.Extra = 1; }));
        if (exact) {
            request.SetHeaders = {"X-Sealed": "yes"};
            check("writable", request.SetHeaders["X-Sealed"] === "yes");
        } else {
            // boa's host ignores a write to an object-valued field of a
            // sealed request (its accessor's setter); a sealed object's
            // writable fields stay writable on an ordinary object.
            request.SetHeaders["X-Sealed"] = "yes";
        }
    } else if (mode === "no-extend") {
        Object.preventExtensions(request);
        delete request.Params;
        request.Params = {};
        check("stays-deleted", !("Params" in request) && Object.keys(request).length === 13);
        check("define-strict", throwsType(function () {
            Object.defineProperty(request, "Params", {value: {}});
        }));
        request.SetHeaders["X-No-Extend"] = "yes";
    } else if (mode === "freeze") {
        var sh2 = request.SetHeaders;
        Object.freeze(request);
        check("frozen", Object.isFrozen(request) &&
            throwsType(function () { "use strict"; request.Body = "x"; }));
        var d = Object.getOwnPropertyDescriptor(request, "Method");
        check("frozen-method", !d.writable && !d.configurable && d.value === "GET");
        // boa's host keeps its object-valued fields accessors (documented
        // in `js/request/build.rs`); elsewhere they are data properties.
        if (exact) {
            d = Object.getOwnPropertyDescriptor(request, "Headers");
            check("frozen-headers", !d.writable && !d.configurable &&
                d.value["X-Mode"][0] === "freeze" && Object.isFrozen(request));
        }
        sh2["X-Frozen"] = "yes";
    } else if (mode === "proxy") {
        var proxied = {"X-Proxied": "yes"};
        out = new Proxy(request, {
            get: function (t, k) { return k === "SetHeaders" ? proxied : t[k]; }
        });
        check("proxy-keys", keys(out) === FIELDS.join() && out.Method === "GET");
        report = proxied;
    } else if (mode === "spread") {
        var c = {...request};
        check("spread", keys(c) === keys(request) && c.Headers === request.Headers &&
            c.ReturnOverrides === request.ReturnOverrides);
        var a = Object.assign({}, request);
        check("assign", keys(a) === FIELDS.join() && a.SetHeaders === request.SetHeaders);
        c.SetHeaders = {"X-Spread": "yes"};
        out = c;
        report = c.SetHeaders;
    } else if (mode === "describe") {
        var ds = Object.getOwnPropertyDescriptors(request);
        check("all", Object.keys(ds).join() === FIELDS.join());
        check("data", ds.Body.value === "" && ds.Body.writable && ds.Body.enumerable &&
            ds.Body.configurable && ds.IgnoreBody.value === false);
        check("containers", !exact || (ds.SetHeaders.value === request.SetHeaders &&
            ds.ReturnOverrides.writable && ds.Headers.value === request.Headers));
        check("entries", Object.entries(request).length === 14 &&
            Object.values(request)[13] === "http");
        check("has-own", Object.hasOwn(request, "Params") && !Object.hasOwn(request, "Nope") &&
            Object.getPrototypeOf(request) === Object.prototype &&
            Object.prototype.toString.call(request) === "[object Object]");
        request.SetHeaders["X-Described"] = "yes";
    } else if (mode === "delete-all") {
        var url = request.URL;
        for (var i = 0; i < FIELDS.length; i++) delete request[FIELDS[i]];
        check("empty", keys(request) === "" && JSON.stringify(request) === "{}");
        // What the host needs back (an answer without URL is refused).
        request.IgnoreBody = true;
        request.SetHeaders = {"X-All-Deleted": "yes"};
        request.URL = url;
        check("re-added", keys(request) === "IgnoreBody,SetHeaders,URL");
    } else if (mode === "keep") {
        kept = request;
    } else if (mode === "reuse") {
        // The request an earlier call kept still shows that call's fields,
        // and writing to it changes nothing of this one.
        request.SetHeaders["X-Kept"] = kept.Method + "," + kept.Body + "," + kept.URL;
        kept.SetHeaders["X-Not-Here"] = "no";
        kept.Extra = 1;
        check("kept-keys", keys(kept) === FIELDS.concat(["Extra"]).join());
    }
    var target = report || request.SetHeaders;
    target["X-Failed"] = failed.join(",") || "none";
    return descMw.ReturnData(out, {});
});
