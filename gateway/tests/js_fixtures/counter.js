// Counts calls in a global: persistent state shows 0,1,2; Tyk's fresh state
// (TestGoja_FreshRuntimePerRequest) shows 0,0,0.
var counterMw = new TykJS.TykMiddleware.NewMiddleware({});
var counterCalls = 0;
counterMw.NewProcessRequest(function (request, session, spec) {
    request.SetHeaders["X-Count"] = String(counterCalls);
    counterCalls++;
    return counterMw.ReturnData(request, {});
});
