// TykJS prelude: the middleware API Tyk's JSVM gives scripts, embedded into
// the gateway at build time and evaluated once in every JS context before the
// API's own scripts.
//
// Tyk calls `<name>.DoProcessRequest(<request as JSON>, ...)`, which base64-
// decodes the body, calls ProcessRequest and JSON-encodes the answer: that is
// Tyk's transport between Go and the VM, not part of the API scripts see. This
// host builds `request` natively (Body already a string) and calls
// `<name>.ProcessRequest(request, session, spec)` directly, then reads back
// the returned `{Request: ...}` object; DoProcessRequest is kept for scripts
// that call it themselves.
var TykJS = (function () {
    function MiddlewareComponentMeta(configuration) {
        this.configuration = configuration;
    }

    // Default handler, as in Tyk: log and hand back the bare request. The
    // host rejects that shape (no `Request` field), so the client gets a 500.
    MiddlewareComponentMeta.prototype.ProcessRequest = function (request, session, config) {
        log("Process Request Not Implemented");
        return request;
    };

    MiddlewareComponentMeta.prototype.DoProcessRequest = function (request, session, config) {
        var processed = this.ProcessRequest(request, session, config);
        if (!processed) {
            log("Middleware didn't return request object!");
            return;
        }
        return JSON.stringify(processed);
    };

    // Response middleware (Tyk master's mw_js_plugin_response.go): the host
    // calls `<name>.ProcessResponse(response, request, session, spec)` and
    // applies the returned `{Response: ...}`. The default, as in Tyk, logs
    // and hands back the bare response, which the host rejects (500).
    MiddlewareComponentMeta.prototype.ProcessResponse = function (response, request, session, config) {
        log("Process Response Not Implemented");
        return response;
    };

    MiddlewareComponentMeta.prototype.DoProcessResponse = function (response, request, session, config) {
        var processed = this.ProcessResponse(response, request, session, config);
        if (!processed) {
            log("Middleware didn't return response object!");
            return;
        }
        return JSON.stringify(processed);
    };

    function NewMiddleware(configuration) {
        MiddlewareComponentMeta.call(this, configuration);
    }
    NewMiddleware.prototype = Object.create(MiddlewareComponentMeta.prototype);
    NewMiddleware.prototype.constructor = NewMiddleware;

    NewMiddleware.prototype.NewProcessRequest = function (callback) {
        this.ProcessRequest = callback;
    };

    NewMiddleware.prototype.NewProcessResponse = function (callback) {
        this.ProcessResponse = callback;
    };

    NewMiddleware.prototype.ReturnResponseData = function (response, sessionMeta) {
        return { Response: response, SessionMeta: sessionMeta };
    };

    NewMiddleware.prototype.ReturnData = function (request, sessionMeta) {
        return { Request: request, SessionMeta: sessionMeta };
    };

    NewMiddleware.prototype.ReturnAuthData = function (request, session) {
        return { Request: request, Session: session };
    };

    function EventHandlerComponentMeta() {}
    EventHandlerComponentMeta.prototype.Handle = function (event, context) {
        log("Handler not implemented!");
        return event;
    };
    function NewEventHandler() {
        EventHandlerComponentMeta.call(this);
    }
    NewEventHandler.prototype = Object.create(EventHandlerComponentMeta.prototype);
    NewEventHandler.prototype.constructor = NewEventHandler;
    NewEventHandler.prototype.NewHandler = function (callback) {
        this.Handle = callback;
    };

    return {
        TykMiddleware: {
            MiddlewareComponentMeta: MiddlewareComponentMeta,
            NewMiddleware: NewMiddleware
        },
        TykEventHandlers: {
            EventHandlerComponentMeta: EventHandlerComponentMeta,
            NewEventHandler: NewEventHandler
        }
    };
})();

// What a virtual endpoint's function returns, as Tyk defines it: the JSON
// text the gateway decodes into the answer (Body, Code, Headers).
function TykJsResponse(response, session_meta) {
    return JSON.stringify({ Response: response, SessionMeta: session_meta });
}
