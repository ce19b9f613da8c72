// A pre hook that calls a service before the request is proxied, as Tyk
// auth-check scripts do: TykMakeHttpRequest to `config_data.upstream`
// (the bench points it at its mock-upstream), then the service's status
// in a header. A failed call (undefined) sets no header, so the bench's
// middleware check fails loudly instead of measuring a script that did
// not call out.
var jsvmMakeHttpPreHook = new TykJS.TykMiddleware.NewMiddleware({});

jsvmMakeHttpPreHook.NewProcessRequest(function (request, session, spec) {
    var reply = TykMakeHttpRequest(JSON.stringify({
        Method: "GET",
        Domain: spec.config_data.upstream,
        Resource: "/check",
        Headers: {"X-Called-By": "jsvm_makehttp.js"}
    }));
    if (reply !== undefined) {
        request.SetHeaders["X-Check-Status"] = String(JSON.parse(reply).Code);
    }
    return jsvmMakeHttpPreHook.ReturnData(request, {});
});
