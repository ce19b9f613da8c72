-- Lua middleware for the HAProxy peer: an http-request action that adds
-- X-Custom-Lua, as the seed's plugins add their header.
core.register_action("hello", { "http-req" }, function(txn)
    txn.http:req_set_header("X-Custom-Lua", "hello-from-lua")
end)
