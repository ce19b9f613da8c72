// One string of X-Size bytes, named X-Count times in the answer field
// X-Field picks: the script holds it once, the host would copy it X-Count
// times. The host bounds the header and query text of one answer at
// 1 MiB (js_head_text.rs).

function asked(headers, name) {
    return parseInt((headers[name] || ["0"])[0], 10);
}

// The names and values the request asks for: [name, value] pairs, every
// value the same string.
function pairs(headers) {
    // At most 64 KiB: `repeat`'s transient 16 bytes per character (boa)
    // stay far within a call's heap.
    var s = "h".repeat(asked(headers, "X-Size"));
    var out = [];
    for (var i = 0, n = asked(headers, "X-Count"); i < n; i++) {
        out.push(["X-Big-" + i, s]);
    }
    return out;
}

var bigHead = new TykJS.TykMiddleware.NewMiddleware({});
bigHead.NewProcessRequest(function (request, session, spec) {
    var field = (request.Headers["X-Field"] || [""])[0];
    var p = pairs(request.Headers);
    var list = [];
    p.forEach(function (kv) {
        if (field === "SetHeaders") {
            request.SetHeaders[kv[0]] = kv[1];
        } else if (field === "AddParams") {
            request.AddParams[kv[0]] = kv[1];
        } else if (field === "ResponseHeaders") {
            request.ReturnOverrides.ResponseHeaders[kv[0]] = kv[1];
        }
        list.push(kv[1]);
    });
    if (field === "DeleteHeaders") {
        request.DeleteHeaders = list;
    } else if (field === "DeleteParams") {
        request.DeleteParams = list;
    } else if (field === "ExtendedParams") {
        request.ExtendedParams = {"x-big": list};
    } else if (field === "ResponseHeaders") {
        request.ReturnOverrides.ResponseCode = 200;
        request.ReturnOverrides.ResponseBody = "forced";
    }
    return bigHead.ReturnData(request, {});
});

var bigResponseHead = new TykJS.TykMiddleware.NewMiddleware({});
bigResponseHead.NewProcessResponse(function (response, request, session, spec) {
    var field = (request.Headers["X-Field"] || [""])[0];
    var list = [];
    pairs(request.Headers).forEach(function (kv) {
        if (field === "SetHeaders") {
            response.SetHeaders[kv[0]] = kv[1];
        }
        list.push(kv[1]);
    });
    if (field === "DeleteHeaders") {
        response.DeleteHeaders = list;
    }
    return bigResponseHead.ReturnResponseData(response, {});
});

function bigEndpointHead(request, session, config) {
    var headers = {};
    pairs(request.Headers).forEach(function (kv) {
        headers[kv[0]] = kv[1];
    });
    return TykJsResponse({Body: "virtual", Code: 200, Headers: headers}, session.meta_data);
}
