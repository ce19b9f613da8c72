// `request` must behave as the plain, JSON-decoded object Tyk hands a script,
// whatever the host builds lazily. Each mode (header X-Mode) exercises one
// way of reading or replacing its fields; failed checks are reported in
// X-Failed.
var kept = null, keptUnread = null;
var plainMw = new TykJS.TykMiddleware.NewMiddleware({});
plainMw.NewProcessRequest(function (request, session, spec) {
    // Modes that must not read Headers first (a host may build it only when
    // read): chosen by the path.
    var path = request.URL.split("?")[0];
    if (path === "/plain/keep-unread") {
        keptUnread = request;
        return plainMw.ReturnData(request, {});
    }
    if (path === "/plain/reuse-unread") {
        // The earlier call's request, its Headers never read until now.
        request.SetHeaders["X-Kept-Probe"] = keptUnread.Headers["X-Probe"][0];
        return plainMw.ReturnData(request, {});
    }
    if (path === "/plain/json-unread") {
        request.SetHeaders["X-Json"] = JSON.stringify(request);
        request.SetHeaders["X-Keys"] = Object.keys(request).join();
        return plainMw.ReturnData(request, {});
    }
    if (path === "/plain/write-unread") {
        request.Headers = {"X-Written": ["w"]};
        request.SetHeaders["X-Written"] = request.Headers["X-Written"][0] +
            "," + Object.keys(request)[0];
        return plainMw.ReturnData(request, {});
    }
    if (path === "/plain/delete-unread") {
        delete request.Headers;
        request.SetHeaders["X-Deleted"] = ("Headers" in request) + "," +
            Object.keys(request).length + "," + JSON.stringify(request).indexOf('"Headers"');
        return plainMw.ReturnData(request, {});
    }
    var mode = request.Headers["X-Mode"][0];
    var failed = [];
    function check(name, ok) { if (!ok) failed.push(name); }
    var out = request;
    if (mode === "inspect") {
        check("keys", JSON.stringify(Object.keys(request)) === JSON.stringify(
            ["Headers", "SetHeaders", "DeleteHeaders", "Body", "URL", "Params", "AddParams",
             "ExtendedParams", "DeleteParams", "ReturnOverrides", "IgnoreBody", "Method",
             "RequestURI", "Scheme"]));
        var forIn = [];
        for (var k in request) forIn.push(k);
        check("for-in", forIn.length === 14 && forIn[0] === "Headers" && forIn[13] === "Scheme");
        check("in", "X-Mode" in request.Headers && !("X-Absent" in request.Headers));
        check("has-own", request.hasOwnProperty("SetHeaders") && "ReturnOverrides" in request);
        check("same-object", request.Headers === request.Headers && request.SetHeaders === request.SetHeaders);
        check("array", Array.isArray(request.DeleteHeaders) && request.DeleteHeaders.length === 0);
        check("params", request.Params.a[0] === "1" && request.Params.a[1] === "2");
        check("overrides", request.ReturnOverrides.ResponseCode === 0 &&
            JSON.stringify(request.ReturnOverrides.ResponseHeaders) === "{}");
        var copy = Object.assign({}, request);
        check("assign", copy.Headers === request.Headers && Object.keys(copy).length === 14);
        var spread = JSON.parse(JSON.stringify(request));
        check("roundtrip", spread.Headers["X-Mode"][0] === "inspect" && spread.Method === "GET" &&
            spread.ExtendedParams !== undefined && spread.ReturnOverrides.OverrideError === false);
        var child = Object.create(request);
        check("inherited", child.Headers === request.Headers);
        child.SetHeaders = {"X-Child": "no"};
        check("inherited-write", request.SetHeaders["X-Child"] === undefined &&
            child.hasOwnProperty("SetHeaders"));
        request.SetHeaders["X-Json"] = JSON.stringify(request);
    } else if (mode === "replace") {
        request.SetHeaders = {"X-Replaced": "yes"};
        check("replaced", request.SetHeaders["X-Replaced"] === "yes");
        request.DeleteHeaders = ["X-Drop"];
        request.Headers = "anything";
        check("headers-write", request.Headers === "anything");
    } else if (mode === "delete") {
        delete request.SetHeaders;
        check("deleted", request.SetHeaders === undefined && !("SetHeaders" in request));
        request.DeleteHeaders.push("X-Drop");
    } else if (mode === "define") {
        Object.defineProperty(request, "SetHeaders", {value: {"X-Defined": "yes"}, enumerable: true});
        check("defined", request.SetHeaders["X-Defined"] === "yes");
    } else if (mode === "copy") {
        var c = {};
        for (var key in request) c[key] = request[key];
        c.SetHeaders = {"X-Copied": "yes"};
        out = c;
    } else if (mode === "freeze") {
        var sh = request.SetHeaders;
        Object.freeze(request);
        request.SetHeaders = {"X-Lost": "yes"};
        check("frozen", request.SetHeaders === sh);
        sh["X-Frozen"] = "yes";
    } else if (mode === "keep") {
        kept = request;
    } else if (mode === "reuse") {
        // The object kept by an earlier call still shows that call's request.
        request.SetHeaders["X-Kept-Mode"] = kept.Headers["X-Mode"][0];
    }
    if (request.SetHeaders) request.SetHeaders["X-Failed"] = failed.join(",") || "none";
    return plainMw.ReturnData(out, {});
});
