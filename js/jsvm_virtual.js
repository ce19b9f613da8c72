// A virtual endpoint, as Tyk runs them (`extended_paths.virtual`): the
// function answers the request itself, from JS, and nothing is proxied.
// `TykJsResponse` is Tyk's: it turns {Body, Code, Headers} into the JSON
// the gateway decodes.
function jsvmVirtualHello(request, session, spec) {
    var body = JSON.stringify({
        message: "hello from a virtual endpoint",
        path: request.URL,
        api: spec.APIID
    });
    return TykJsResponse({
        Body: body,
        Code: 200,
        Headers: {"Content-Type": "application/json", "X-Custom-JSVM-Virtual": "hello-from-jsvm-virtual"}
    }, session.meta_data);
}
