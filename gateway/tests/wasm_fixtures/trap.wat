;; Traps (executes `unreachable`) on requests that carry x-fault;
;; lets the others through.
(module
  (import "env" "proxy_get_header_map_value"
    (func $get (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "x-fault")
  (global $bump (mut i32) (i32.const 1024))
  ;; A bump allocator: enough for the host to hand back a few values.
  (func (export "malloc") (param $n i32) (result i32)
    (global.get $bump)
    (global.set $bump (i32.add (global.get $bump) (local.get $n))))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_context_create") (param i32 i32))
  ;; True when the request has an x-fault header (status 0 = found).
  (func $fault (result i32)
    (i32.eqz (call $get (i32.const 0) (i32.const 16) (i32.const 7) (i32.const 64) (i32.const 68))))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (if (call $fault) (then unreachable))
    (i32.const 0)))
