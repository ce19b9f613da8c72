// Echoes the URL and RequestURI each call gets; X-Rewrite sets URL.
var urlMw = new TykJS.TykMiddleware.NewMiddleware({});
urlMw.NewProcessRequest(function (request, session, spec) {
    request.SetHeaders["X-Url"] = request.URL;
    request.SetHeaders["X-Uri"] = request.RequestURI;
    var to = request.Headers["X-Rewrite"];
    if (to) {
        request.URL = to[0];
    }
    return urlMw.ReturnData(request, {});
});
