// Reads Headers (canonical names, arrays), spec and config_data; edits to
// request.Headers must be ignored; deletes apply before sets.
var headersMw = new TykJS.TykMiddleware.NewMiddleware({});
headersMw.NewProcessRequest(function (request, session, spec) {
    request.SetHeaders["X-Seen-Key"] = request.Headers["X-Api-Key"][0];
    request.SetHeaders["X-Seen-Multi"] = JSON.stringify(request.Headers["X-Multi"]);
    request.SetHeaders["X-Seen-Method"] = request.Method + " " + request.URL + " " + request.Scheme;
    request.SetHeaders["X-Seen-Spec"] = spec.APIID + "/" + spec.OrgID + "/" + spec.config_data.greeting;
    request.SetHeaders["X-Seen-Session"] = JSON.stringify(session);
    var utf8 = (request.Headers["X-Utf8"] || [""])[0];
    var bad = (request.Headers["X-Bad-Utf8"] || [""])[0];
    request.SetHeaders["X-Seen-Text"] = utf8.length + ":" + utf8.charCodeAt(3) + "," +
        bad.length + ":" + bad.charCodeAt(0);
    request.Headers["X-Ignored"] = ["edited"];
    request.DeleteHeaders.push("X-Replace");
    request.DeleteHeaders.push("X-Drop");
    request.SetHeaders["X-Replace"] = "new";
    return headersMw.ReturnData(request, {});
});
