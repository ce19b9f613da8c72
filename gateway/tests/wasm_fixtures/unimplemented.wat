;; Calls proxy_http_call, which this host does not implement, and reports
;; the status it got as `x-status: unimplemented` (12) or `x-status: other`.
(module
  (import "env" "proxy_http_call"
    (func $http_call (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_add_header_map_value"
    (func $add (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "x-status")
  (data (i32.const 32) "unimplemented")
  (data (i32.const 48) "other")
  (func (export "malloc") (param i32) (result i32) (i32.const 1024))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (if (i32.eq (i32.const 12)
          (call $http_call (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)
                           (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 100) (i32.const 64)))
      (then (drop (call $add (i32.const 0) (i32.const 16) (i32.const 8) (i32.const 32) (i32.const 13))))
      (else (drop (call $add (i32.const 0) (i32.const 16) (i32.const 8) (i32.const 48) (i32.const 5)))))
    (i32.const 0)))
