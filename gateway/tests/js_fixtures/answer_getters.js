// An answer whose fields are getters: the host must read each once, run
// them as Tyk's JSON encoding would, and fail only this request when one
// throws. X-Mode: "apply", "throw", or "report" (the reads of the previous
// call, where state persists).
var reads = [];
var gettersMw = new TykJS.TykMiddleware.NewMiddleware({});
gettersMw.NewProcessRequest(function (request, session, spec) {
    var mode = request.Headers["X-Mode"][0];
    if (mode === "report") {
        request.SetHeaders["X-Reads"] = reads.join(",");
        reads = [];
        return gettersMw.ReturnData(request, {});
    }
    reads = [];
    var r = {};
    ["ReturnOverrides", "IgnoreBody", "Body", "URL", "DeleteHeaders", "SetHeaders",
     "DeleteParams", "AddParams", "ExtendedParams"].forEach(function (k) {
        var v = k === "SetHeaders" ? {"X-Via-Getter": "yes"} : request[k];
        Object.defineProperty(r, k, {
            enumerable: true,
            get: function () {
                reads.push(k);
                if (mode === "throw" && k === "SetHeaders") throw new Error("no headers here");
                return v;
            }
        });
    });
    var ret = {SessionMeta: {}};
    Object.defineProperty(ret, "Request", {
        enumerable: true,
        get: function () { reads.push("Request"); return r; }
    });
    return ret;
});
