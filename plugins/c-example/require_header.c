/*
 * A native plugin in plain C, against plugins/sdk/include/gw_plugin.h.
 *
 * RequireHeader: answers 403 with a JSON body when the request has no
 * X-Api-Key header; otherwise tags the request with X-C-Plugin and lets it
 * through. It is the proof that the ABI is C, not Rust-to-Rust by accident.
 *
 * To try this: 1. cc -shared -fPIC -O2 -Wall -Werror -I plugins/sdk/include
 *    -o librequire_header.so plugins/c-example/require_header.c;
 * 2. add {"name": "RequireHeader", "path": "librequire_header.so"} to an API's
 *    custom_middleware.pre with "driver": "goplugin";
 * 3. curl that API with and without -H 'X-Api-Key: k'.
 */
#include <stdio.h>
#include <string.h>

#include "gw_plugin.h"

GW_PLUGIN_EXPORT_ABI_VERSION()

GW_EXPORT int32_t RequireHeader(const GwHost *host, GwRequest *req) {
    /* Another ABI version, or a table too short to hold version 1. */
    if (!GW_HOST_OK(host)) {
        return GW_ERROR;
    }
    GwStr key;
    if (host->header_get(req, GW_STR("X-Api-Key"), 0, &key) != GW_FOUND || key.len == 0) {
        /* log is an ABI 1.1 callback: an older gateway may not have it. */
        if (GW_HOST_HAS(host, log)) {
            host->log(req, GW_LOG_INFO, GW_STR("RequireHeader: no X-Api-Key, answering 403"));
        }
        GwHeader headers[] = {
            {GW_STR("Content-Type"), GW_STR("application/json")},
            {GW_STR("X-Denied-By"), GW_STR("c-plugin")},
        };
        return host->respond(req, 403, headers, 2,
                             GW_STR("{\"error\": \"X-Api-Key header is required\"}")) == GW_OK
                   ? GW_CONTINUE
                   : GW_ERROR;
    }
    /* Echo what the C side read, so a test can check reads as well as writes. */
    char tag[96];
    GwStr method = host->method(req);
    int n = snprintf(tag, sizeof tag, "%.*s key-len=%zu", (int)method.len,
                     (const char *)method.ptr, key.len);
    if (n < 0 || (size_t)n >= sizeof tag) {
        host->set_error(req, GW_STR("tag too long"));
        return GW_ERROR;
    }
    if (host->set_header(req, GW_STR("X-C-Plugin"), (GwStr){(const uint8_t *)tag, (size_t)n}) !=
        GW_OK) {
        return GW_ERROR;
    }
    return GW_CONTINUE;
}
