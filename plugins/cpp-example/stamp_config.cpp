/*
 * A native plugin in C++, against plugins/sdk/include/gw_plugin.h.
 *
 * StampConfig: copies the API's id and its config_data (JSON text) into
 * request headers, and logs through the gateway. It is the proof that the
 * header works from C++: the exported names are not mangled (the macros
 * carry extern "C"), GW_STR/GW_CSTR build GwStr without C's compound
 * literals, and no C++ exception ever crosses into the gateway.
 *
 * To try this: 1. c++ -std=c++17 -shared -fPIC -O2 -Wall -Werror
 *    -I plugins/sdk/include -o libstamp_config.so
 *    plugins/cpp-example/stamp_config.cpp;
 * 2. add {"name": "StampConfig", "path": "libstamp_config.so"} to an API's
 *    custom_middleware.pre with "driver": "goplugin" and some config_data;
 * 3. curl that API through the mock upstream and read the echoed headers.
 */
#include <exception>
#include <string>

#include "gw_plugin.h"

GW_PLUGIN_EXPORT_ABI_VERSION()

namespace {

GwStr view(const std::string &s) {
    return GwStr{reinterpret_cast<const uint8_t *>(s.data()), s.size()};
}

std::string copy(GwStr s) {
    return std::string(reinterpret_cast<const char *>(s.ptr), s.len);
}

int32_t stamp(const GwHost *host, GwRequest *req) {
    if (!GW_HOST_HAS(host, config_data) || !GW_HOST_HAS(host, log)) {
        host->set_error(req, GW_STR("StampConfig needs a gateway with ABI 1.1"));
        return GW_ERROR;
    }
    // Copied: the host's strings are valid only until the next edit.
    std::string id = copy(host->api_id(req));
    std::string config = copy(host->config_data(req));
    std::string line = "StampConfig: api " + id + ", config_data " + config;
    host->log(req, GW_LOG_DEBUG, view(line));
    if (host->set_header(req, GW_STR("X-Cpp-Api-Id"), view(id)) != GW_OK ||
        host->set_header(req, GW_CSTR("X-Cpp-Config"), view(config)) != GW_OK) {
        return GW_ERROR;
    }
    return GW_CONTINUE;
}

}  // namespace

GW_PLUGIN_FN(StampConfig) {
    if (!GW_HOST_OK(host)) {
        return GW_ERROR;
    }
    // An exception unwinding into the gateway would abort it: stop it here.
    try {
        return stamp(host, req);
    } catch (const std::exception &e) {
        host->set_error(req, GW_CSTR(e.what()));
        return GW_ERROR;
    }
}
