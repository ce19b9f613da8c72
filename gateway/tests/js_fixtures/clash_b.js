var mw = new TykJS.TykMiddleware.NewMiddleware({});
var owner = "b";
mw.NewProcessRequest(function (request, session, spec) {
    request.SetHeaders["X-Owner"] = owner;
    return mw.ReturnData(request, {});
});
