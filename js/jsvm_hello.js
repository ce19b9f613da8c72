var jsvmHelloPreHook = new TykJS.TykMiddleware.NewMiddleware({});

jsvmHelloPreHook.NewProcessRequest(function(request, session) {
    request.SetHeaders["X-Custom-JSVM"] = "hello-from-jsvm";
    return jsvmHelloPreHook.ReturnData(request, {});
});

log("jsvm_hello.js middleware loaded");
