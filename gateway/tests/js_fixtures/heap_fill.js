// Runs QuickJS out of heap (`--jsvm-memory`) in every phase, as the
// request's X-Oom header asks (js_quickjs_memory.rs):
//
// - "call": the script itself allocates without end; the allocation that
//   passes the limit throws, and nothing catches it.
// - "answer": the script makes its answer first, then fills the heap to
//   the last bytes (catching every failure) and returns it; what fails is
//   the host reading the answer: each answer holds a string of non-ASCII
//   text, which the host cannot read without a block of the heap.
// - anything else: the answer alone (the request after a failed one).
//
// What fills the heap is a global, so a `persistent` context that were
// kept after its call failed would fail the next request too.

var hog = null;

// A list of ever smaller strings: no block larger than one string, so the
// heap fills to within one small node.
function fill() {
    for (var size = 1 << 20; size > 0; size >>= 1) {
        try {
            for (;;) {
                hog = { s: "x".repeat(size), next: hog };
            }
        } catch (e) {}
    }
}

function grow() {
    var a = [];
    for (;;) {
        a.push("x".repeat(1024) + a.length);
    }
}

// What the answer carries: 4 KiB of UTF-8 (2,048 non-ASCII characters).
var TEXT = "\u00e9".repeat(2048);

function oom(headers) {
    return headers["X-Oom"] ? headers["X-Oom"][0] : "";
}

var fillRequest = new TykJS.TykMiddleware.NewMiddleware({});
fillRequest.NewProcessRequest(function (request, session, spec) {
    var c = oom(request.Headers);
    request.SetHeaders["X-Served"] = "yes";
    request.Body = TEXT;
    var answer = fillRequest.ReturnData(request, {});
    if (c === "call") {
        grow();
    } else if (c === "answer") {
        fill();
    }
    return answer;
});

var fillResponse = new TykJS.TykMiddleware.NewMiddleware({});
fillResponse.NewProcessResponse(function (response, request, session, spec) {
    var c = oom(request.Headers);
    response.Body = TEXT;
    response.SetHeaders = { "X-Served": "yes" };
    var answer = fillResponse.ReturnResponseData(response, {});
    if (c === "call") {
        grow();
    } else if (c === "answer") {
        fill();
    }
    return answer;
});

function fillEndpoint(request, session, config) {
    var c = oom(request.Headers);
    var answer = TykJsResponse({ Body: TEXT, Code: 200 }, session.meta_data);
    if (c === "call") {
        grow();
    } else if (c === "answer") {
        fill();
    }
    return answer;
}
