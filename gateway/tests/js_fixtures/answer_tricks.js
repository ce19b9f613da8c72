// Answers that reach the host in unusual ways, chosen by the X-Case header:
// a Proxy around the request, fields redefined as other accessors, a getter
// that recurses while the host reads it, informational override codes.
var tricksMw = new TykJS.TykMiddleware.NewMiddleware({});
tricksMw.NewProcessRequest(function (request, session, spec) {
    var which = (request.Headers["X-Case"] || ["ok"])[0];
    request.SetHeaders["X-Mw"] = "ran";
    var answer = tricksMw.ReturnData(request, {});
    if (which === "proxy-deny") {
        request.ReturnOverrides.ResponseCode = 403;
        request.ReturnOverrides.ResponseError = "denied";
        answer.Request = new Proxy(request, {});
    } else if (which === "proxy-edit") {
        request.SetHeaders["X-Through-Proxy"] = "yes";
        request.DeleteHeaders.push("X-Drop-Me");
        answer.Request = new Proxy(request, {});
    } else if (which === "redefine-deny") {
        Object.defineProperty(request, "ReturnOverrides", {
            get: function () { return { ResponseCode: 403, ResponseError: "denied" }; },
            enumerable: true, configurable: true
        });
    } else if (which === "redefine-sets") {
        Object.defineProperty(request, "SetHeaders", {
            get: function () { return { "X-From-Getter": "yes" }; }
        });
    } else if (which === "recurse") {
        Object.defineProperty(answer, "Request", {
            get: function () { return this.Request; }, enumerable: true
        });
    } else if (which === "recurse-header") {
        Object.defineProperty(request.SetHeaders, "X-R", {
            get: function () { return this["X-R"]; }, enumerable: true
        });
    } else if (which === "sets-array") {
        request.SetHeaders = ["X-A", "b"];
    } else if (which === "params-array") {
        request.AddParams = ["a", "1"];
    } else if (which === "extended-array") {
        request.ExtendedParams = [["a", "1"]];
    } else if (which === "ro-headers-array") {
        request.ReturnOverrides.ResponseCode = 200;
        request.ReturnOverrides.ResponseHeaders = ["X-A", "b"];
    } else if (which === "slow-regex") {
        // Exponential backtracking: seconds inside one native step.
        /^(a+)+$/.test("aaaaaaaaaaaaaaaaaaaaaaaaaa!");
    } else if (which === "fn-answer") {
        // A function carrying the answer's fields: JSON.stringify makes
        // it undefined in Tyk, so the request fails.
        request.ReturnOverrides.ResponseCode = 403;
        var f = function () {};
        f.Request = request;
        f.SessionMeta = {};
        return f;
    } else if (which === "fn-request") {
        request.ReturnOverrides.ResponseCode = 403;
        var g = function () {};
        g.SetHeaders = { "X-From-Function": "yes" };
        g.ReturnOverrides = request.ReturnOverrides;
        answer.Request = g;
    } else if (which === "code-100" || which === "code-101" || which === "code-199") {
        request.ReturnOverrides.ResponseCode = Number(which.slice(5));
        request.ReturnOverrides.ResponseBody = "interim?";
    }
    return answer;
});
