// URL, Params and the three param edits, in Tyk's order.
var queryMw = new TykJS.TykMiddleware.NewMiddleware({});
queryMw.NewProcessRequest(function (request, session, spec) {
    request.SetHeaders["X-Params"] = JSON.stringify(request.Params);
    request.SetHeaders["X-Uris"] = request.URL + " " + request.RequestURI;
    if (request.Params["move"]) {
        request.URL = "/moved/here?keep=1&drop=2&multi=a";
    }
    request.DeleteParams.push("drop");
    request.AddParams["added"] = "x y";
    request.ExtendedParams["multi"] = ["b", "c"];
    return queryMw.ReturnData(request, {});
});
