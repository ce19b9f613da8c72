// ReturnOverrides, chosen by the X-Mode header.
var overridesMw = new TykJS.TykMiddleware.NewMiddleware({});
overridesMw.NewProcessRequest(function (request, session, spec) {
    var mode = (request.Headers["X-Mode"] || ["none"])[0];
    var ro = request.ReturnOverrides;
    if (mode === "error") {
        ro.ResponseCode = 403;
        ro.ResponseError = "go away";
        ro.ResponseBody = "ignored";
        ro.ResponseHeaders = { "X-Why": "policy" };
    } else if (mode === "ok") {
        ro.ResponseCode = 200;
        ro.ResponseBody = "answered by js";
        ro.ResponseHeaders["Content-Type"] = "text/plain";
    } else if (mode === "override") {
        ro.ResponseCode = 418;
        ro.ResponseError = "unused";
        ro.ResponseBody = "teapot body";
        ro.OverrideError = true;
    }
    return overridesMw.ReturnData(request, {});
});
