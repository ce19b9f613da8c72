/*
 * gw_plugin.h: the gateway's native plugin ABI, version 1 (1.3), for C and C++.
 *
 * This declares exactly what plugins/sdk/src/abi.rs declares for Rust; the
 * two change together, and GW_PLUGIN_ABI_VERSION with them.
 *
 * A plugin library:
 *   - exports `uint32_t gw_plugin_abi_version(void)` returning
 *     GW_PLUGIN_ABI_VERSION (use GW_PLUGIN_EXPORT_ABI_VERSION() once); the
 *     gateway refuses the library at load otherwise;
 *   - exports one `int32_t Name(const GwHost *host, GwRequest *req)` per
 *     middleware, under the `name` the API definition gives.
 *
 * The gateway calls a middleware on one of its worker threads, possibly on
 * several threads at once: keep global state thread-safe. `req` is valid only
 * during the call. Return GW_CONTINUE, or GW_ERROR (the client gets Tyk's
 * 500 {"error": "Internal Server Error"}; call host->set_error first to say
 * why in the gateway log).
 *
 * Memory: GwStr is a borrowed (pointer, length) pair, not NUL-terminated.
 * Strings the host returns stay valid until the next editing callback on the
 * same request or the end of the call. Strings you pass in are copied.
 *
 * Versions: GW_PLUGIN_ABI_VERSION changes only on incompatible changes.
 * Callbacks added later are appended to GwHost (ABI 1.1: api_id,
 * config_data, log, call_budget_us; ABI 1.2: the response_* callbacks;
 * ABI 1.3: set_method, add_client_header) and host->size grows: test
 * GW_HOST_HAS(host, field) before calling one, so the plugin also runs on an
 * older gateway. Fields before api_id are always there (GW_HOST_BASE_SIZE).
 *
 * Editing callbacks return GW_OK or GW_REJECTED. A rejected edit (a header
 * name or value that is not valid HTTP, a bad path, a status outside
 * 200..599) is not applied and fails the request with 500, whatever the
 * plugin returns: invalid data never reaches the upstream.
 *
 * Response entries (custom_middleware.response, ABI 1.2): a function of
 * the same type, called after the upstream answered. The response_*
 * callbacks read and edit the upstream's answer; the request callbacks
 * read the request as it went upstream (no body), and request edits are
 * refused. The gateway serves a library as a response entry only when it
 * exports gw_plugin_abi_minor() >= 2 (GW_PLUGIN_EXPORT_ABI_VERSION() does).
 *
 * To try this: 1. write a plugin including this header (see
 * plugins/c-example/require_header.c); 2. `cc -shared -fPIC -I
 * plugins/sdk/include -o libx.so x.c`; 3. name libx.so and the symbol in an
 * API definition with "driver": "goplugin".
 */
#ifndef GW_PLUGIN_H
#define GW_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h> /* strlen, for GW_CSTR */

#ifdef __cplusplus
extern "C" {
#endif

#define GW_PLUGIN_ABI_VERSION 1u
/* Which appended callbacks this header knows (exported by the macro below). */
#define GW_PLUGIN_ABI_MINOR 3u

/* Plugin return values. */
#define GW_CONTINUE 0
#define GW_ERROR 1

/* Editing callback return values. */
#define GW_OK 0
#define GW_REJECTED (-1)

/* log levels, most to least severe. */
#define GW_LOG_ERROR 0u
#define GW_LOG_WARN 1u
#define GW_LOG_INFO 2u
#define GW_LOG_DEBUG 3u

/* Lookup return values. */
#define GW_FOUND 1
#define GW_NOT_FOUND 0

/* A borrowed byte string; ptr may be NULL when len is 0. */
typedef struct GwStr {
    const uint8_t *ptr;
    size_t len;
} GwStr;

typedef struct GwHeader {
    GwStr name;
    GwStr value;
} GwHeader;

/* The request: opaque, owned by the gateway, valid for one call. */
typedef struct GwRequest GwRequest;

/* The gateway's callbacks. abi_version and size come first and never move. */
typedef struct GwHost {
    uint32_t abi_version; /* GW_PLUGIN_ABI_VERSION of the gateway */
    uint32_t size;        /* sizeof(GwHost) in the gateway */

    /* Method ("GET", ...). */
    GwStr (*method)(const GwRequest *req);
    /* Path, still percent-encoded, starting with '/'. */
    GwStr (*path)(const GwRequest *req);
    /* Query without '?': GW_FOUND and *out set, or GW_NOT_FOUND (no '?'). */
    int32_t (*query)(const GwRequest *req, GwStr *out);
    /* Number of values of header `name` (case-insensitive). */
    size_t (*header_count)(const GwRequest *req, GwStr name);
    /* Value `index` of header `name`: GW_FOUND and *out set, or GW_NOT_FOUND. */
    int32_t (*header_get)(const GwRequest *req, GwStr name, size_t index, GwStr *out);
    /* Number of header lines (one per value). */
    size_t (*header_lines)(const GwRequest *req);
    /* Header line `index` (lower-case name): GW_FOUND, or GW_NOT_FOUND. */
    int32_t (*header_line)(const GwRequest *req, size_t index, GwHeader *out);
    /* The whole buffered body. */
    GwStr (*body)(const GwRequest *req);

    /* Replace every value of header `name` with `value`. */
    int32_t (*set_header)(GwRequest *req, GwStr name, GwStr value);
    /* Add a value to header `name`. */
    int32_t (*append_header)(GwRequest *req, GwStr name, GwStr value);
    /* Remove header `name` (absent is fine). */
    int32_t (*delete_header)(GwRequest *req, GwStr name);
    /* Replace the path (starts with '/', no '?' or '#'). */
    int32_t (*set_path)(GwRequest *req, GwStr path);
    /* Replace the query (without '?'); NULL removes it. */
    int32_t (*set_query)(GwRequest *req, const GwStr *query);
    /* Replace the body; the gateway fixes Content-Length. At most 32 MiB
     * (the gateway's bound on a body held for middleware): a longer one is
     * refused (GW_REJECTED) and the request fails. */
    int32_t (*set_body)(GwRequest *req, GwStr body);
    /* Answer the request yourself: when the plugin then returns GW_CONTINUE,
     * the chain stops, nothing is proxied, and the client gets exactly this.
     * The body is at most 32 MiB, as set_body's. */
    int32_t (*respond)(GwRequest *req, uint16_t status, const GwHeader *headers,
                       size_t header_count, GwStr body);
    /* Say why the plugin is about to return GW_ERROR (logged, not sent). */
    void (*set_error)(GwRequest *req, GwStr message);

    /* ---- ABI 1.1, appended: check GW_HOST_HAS(host, field) first. ---- */
    /* The API's api_id. */
    GwStr (*api_id)(const GwRequest *req);
    /* The API's config_data as JSON text ("{}" when absent); valid all call. */
    GwStr (*config_data)(const GwRequest *req);
    /* Log through the gateway (tagged with API and middleware); GW_LOG_*.
     * One line: control characters escaped, cut at 16 KiB (length noted). */
    void (*log)(const GwRequest *req, uint32_t level, GwStr message);
    /* The gateway's budget for one call, in microseconds (--jsvm-timeout). */
    uint64_t (*call_budget_us)(const GwRequest *req);

    /* ---- ABI 1.2, the response phase: check GW_HOST_HAS(host, field). ---- */
    /* The upstream's status; 0 outside the response phase. */
    uint16_t (*response_status)(const GwRequest *req);
    /* Replace the status the client gets (200..999; an interim 1xx is refused). */
    int32_t (*set_response_status)(GwRequest *req, uint16_t status);
    /* Response headers, as the request's header_count/get/lines/line. */
    size_t (*response_header_count)(const GwRequest *req, GwStr name);
    int32_t (*response_header_get)(const GwRequest *req, GwStr name, size_t index, GwStr *out);
    size_t (*response_header_lines)(const GwRequest *req);
    int32_t (*response_header_line)(const GwRequest *req, size_t index, GwHeader *out);
    /* Edit response headers, as set_header/append_header/delete_header. */
    int32_t (*set_response_header)(GwRequest *req, GwStr name, GwStr value);
    int32_t (*append_response_header)(GwRequest *req, GwStr name, GwStr value);
    int32_t (*delete_response_header)(GwRequest *req, GwStr name);
    /* The upstream's whole buffered body, and its replacement (at most
     * 32 MiB, as set_body's). */
    GwStr (*response_body)(const GwRequest *req);
    int32_t (*set_response_body)(GwRequest *req, GwStr body);

    /* ---- ABI 1.3, request-phase edits: check GW_HOST_HAS(host, field). ---- */
    /* Replace the method sent upstream (an HTTP token, e.g. "POST"). */
    int32_t (*set_method)(GwRequest *req, GwStr method);
    /* Add a header to the answer the client gets for this request: these
     * values first, the upstream's added after them (Tyk's rw.Header().Add
     * before proxying); on an answer the gateway or a later middleware
     * writes, its names win. Hop-by-hop names and Content-Length are
     * dropped when sent. Refused in the response phase. */
    int32_t (*add_client_header)(GwRequest *req, GwStr name, GwStr value);
} GwHost;

/* Every version-1 host has at least the callbacks before api_id. */
#define GW_HOST_BASE_SIZE offsetof(GwHost, api_id)
/* True when the host's table has callback `field` (one appended later). */
#define GW_HOST_HAS(host, field)                                               \
    ((size_t)(host)->size >= offsetof(GwHost, field) + sizeof((host)->field))
/* True when `host` is a table this plugin can use at all. */
#define GW_HOST_OK(host)                                                       \
    ((host)->abi_version == GW_PLUGIN_ABI_VERSION && (host)->size >= GW_HOST_BASE_SIZE)

typedef int32_t (*GwPluginFn)(const GwHost *host, GwRequest *req);

/* A GwStr for a string literal or NUL-terminated C string. C++ has no
 * compound literals, so there the same macros build the struct with a
 * braced initialiser. */
#ifdef __cplusplus
#define GW_STR(s) (GwStr{(const uint8_t *)(s), sizeof(s) - 1})
#define GW_CSTR(s) (GwStr{(const uint8_t *)(s), strlen(s)})
#else
#define GW_STR(s) ((GwStr){(const uint8_t *)(s), sizeof(s) - 1})
#define GW_CSTR(s) ((GwStr){(const uint8_t *)(s), strlen(s)})
#endif

#if defined(_WIN32)
#define GW_EXPORT __declspec(dllexport)
#else
#define GW_EXPORT __attribute__((visibility("default")))
#endif

/* Exports the version symbol the gateway checks at load. Use once, at file
 * scope. Under C++ it carries its own extern "C": the macro expands in the
 * plugin's file, outside this header's extern "C" block, and a mangled name
 * would not be found. Export your middleware the same way (GW_PLUGIN_FN). */
#ifdef __cplusplus
#define GW_EXTERN_C extern "C"
#else
#define GW_EXTERN_C
#endif
#define GW_PLUGIN_EXPORT_ABI_VERSION()                                         \
    GW_EXTERN_C GW_EXPORT uint32_t gw_plugin_abi_version(void) {               \
        return GW_PLUGIN_ABI_VERSION;                                          \
    }                                                                          \
    GW_EXTERN_C GW_EXPORT uint32_t gw_plugin_abi_minor(void) {                 \
        return GW_PLUGIN_ABI_MINOR;                                            \
    }
/* Declares an exported middleware: GW_PLUGIN_FN(Name) { ... body ... }. */
#define GW_PLUGIN_FN(name)                                                     \
    GW_EXTERN_C GW_EXPORT int32_t name(const GwHost *host, GwRequest *req)

#ifdef __cplusplus
}
#endif

#endif /* GW_PLUGIN_H */
