// A script that reaches for the host's own hand-over object: on boa the
// request travels to the dispatch through the hidden global `__tykHost`
// (QuickJS's host has none, so there this script only answers). The script
// puts a getter of its own where the request goes, then freezes the object.
// The host must still hand every call its own request, and a call that
// throws must still fail.
var tamperMw = new TykJS.TykMiddleware.NewMiddleware({});

if (typeof __tykHost === "object" && __tykHost !== null) {
    try {
        Object.defineProperty(__tykHost, "request", {
            get: function () { return { SetHeaders: {}, URL: "/forged" }; },
            enumerable: true,
            configurable: true
        });
    } catch (e) {}
    Object.freeze(__tykHost);
}

tamperMw.NewProcessRequest(function (request, session) {
    if (request.Headers["X-Throw"]) {
        throw new Error("thrown past a frozen host");
    }
    request.SetHeaders["X-Seen-Url"] = request.URL;
    request.SetHeaders["X-Seen-Probe"] = (request.Headers["X-Probe"] || ["none"])[0];
    return tamperMw.ReturnData(request, {});
});
