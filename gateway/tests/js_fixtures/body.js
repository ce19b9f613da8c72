// Body rewrite on POST, IgnoreBody, and the base64 helpers.
var bodyMw = new TykJS.TykMiddleware.NewMiddleware({});
bodyMw.NewProcessRequest(function (request, session, spec) {
    request.SetHeaders["X-Seen"] = request.Method + " " + JSON.stringify(request.Body);
    var enc = b64enc(request.Body);
    request.SetHeaders["X-B64"] = enc;
    request.SetHeaders["X-Roundtrip"] = String(b64dec(enc) === request.Body);
    request.SetHeaders["X-Raw"] = rawb64enc("ab") + "," + rawb64dec(rawb64enc("ab")) + "," + b64dec("YWI");
    request.SetHeaders["X-Bad-B64"] = String(b64dec("!!!"));
    request.Body = "rewritten:" + request.Body;
    if (request.Headers["X-Ignore-Body"]) {
        request.IgnoreBody = true;
    }
    return bodyMw.ReturnData(request, {});
});
