// A script that compiles what the client sends: `eval` of the request
// body, or `new Function` of it. Deeply nested text must fail that
// request, never the process.
var evalMw = new TykJS.TykMiddleware.NewMiddleware({});

evalMw.NewProcessRequest(function (request, session) {
    var how = (request.Headers["X-How"] || ["eval"])[0];
    var v = how === "function" ? new Function("return " + request.Body)() : eval(request.Body);
    request.SetHeaders["X-Value"] = String(v);
    return evalMw.ReturnData(request, {});
});
