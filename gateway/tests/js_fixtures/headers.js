// Reads Headers (canonical names, arrays), spec and config_data; edits to
// request.Headers must be ignored; deletes apply before sets.
var headersMw = new TykJS.TykMiddleware.NewMiddleware({});
headersMw.NewProcessRequest(function (request, session, spec) {
    request.SetHeaders["X-Seen-Key"] = request.Headers["X-Api-Key"][0];
    request.SetHeaders["X-Seen-Multi"] = JSON.stringify(request.Headers["X-Multi"]);
    request.SetHeaders["X-Seen-Method"] = request.Method + " " + request.URL + " " + request.Scheme;
    request.SetHeaders["X-Seen-Spec"] = spec.APIID + "/" + spec.OrgID + "/" + spec.config_data.greeting;
    request.SetHeaders["X-Seen-Session"] = JSON.stringify(session);
    request.Headers["X-Ignored"] = ["edited"];
    request.DeleteHeaders.push("X-Replace");
    request.DeleteHeaders.push("X-Drop");
    request.SetHeaders["X-Replace"] = "new";
    return headersMw.ReturnData(request, {});
});
