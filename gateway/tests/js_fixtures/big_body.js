// Bodies of the size the request's X-Size header asks for (decimal
// bytes), handed back in every field the host makes a body of: the host
// bounds them all at 32 MiB (js_bodies.rs). X-Field picks the field of a
// request-phase answer: "body" (request.Body), "response-body"
// (ReturnOverrides.ResponseBody) or "response-error"
// (ReturnOverrides.ResponseError).

// n bytes of "b", made by doubling: boa's "b".repeat(n) first makes a
// vector of n 16-byte slices (512 MiB for 32 MiB), past the ceiling of a
// call under the default --jsvm-memory; doubling peaks near 3 n.
function sized(n) {
    var out = "";
    var piece = "b";
    while (n > 0) {
        if (n % 2 === 1) {
            out += piece;
        }
        n = Math.floor(n / 2);
        if (n > 0) {
            piece += piece;
        }
    }
    return out;
}

function asked(headers) {
    return parseInt((headers["X-Size"] || ["0"])[0], 10);
}

var bigBody = new TykJS.TykMiddleware.NewMiddleware({});
bigBody.NewProcessRequest(function (request, session, spec) {
    var n = asked(request.Headers);
    var field = (request.Headers["X-Field"] || ["body"])[0];
    if (field === "body") {
        request.Body = sized(n);
    } else if (field === "response-body") {
        request.ReturnOverrides.ResponseCode = 200;
        request.ReturnOverrides.ResponseBody = sized(n);
    } else if (field === "response-error") {
        request.ReturnOverrides.ResponseCode = 200;
        request.ReturnOverrides.ResponseError = sized(n);
    }
    return bigBody.ReturnData(request, {});
});

var bigResponse = new TykJS.TykMiddleware.NewMiddleware({});
bigResponse.NewProcessResponse(function (response, request, session, spec) {
    response.Body = sized(asked(request.Headers));
    return bigResponse.ReturnResponseData(response, {});
});

function bigEndpoint(request, session, config) {
    return TykJsResponse({Body: sized(asked(request.Headers)), Code: 200}, session.meta_data);
}
