// A response hook, as Tyk master runs them (`custom_middleware.response`):
// adds a header to the upstream's answer and rewrites its JSON body. On the
// seed's mock upstream the body is the echo `{message, path, method,
// headers}`; the hook adds its marker to the echoed headers, so the bench
// can see in the body that it ran. An answer without that JSON (to HEAD,
// a 204, an upstream's error page) keeps its body: a hook that throws
// costs its client a 500.
var jsvmResponseHook = new TykJS.TykMiddleware.NewMiddleware({});

jsvmResponseHook.NewProcessResponse(function (response, request, session, spec) {
    response.SetHeaders["X-Custom-JSVM-Response"] = "hello-from-jsvm-response";
    var echo = null;
    try {
        echo = JSON.parse(response.Body);
    } catch (e) {
        // not JSON: passed on as it came
    }
    if (echo !== null && typeof echo.headers === "object" && echo.headers !== null) {
        echo.headers["X-Custom-Jsvm-Response"] = "hello-from-jsvm-response";
        response.Body = JSON.stringify(echo);
    }
    return jsvmResponseHook.ReturnResponseData(response, {});
});
