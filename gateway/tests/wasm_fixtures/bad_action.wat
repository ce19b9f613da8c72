;; Returns an action the ABI does not have from its headers phase: 7, or -1
;; when the request carries x-negative.
(module
  (import "env" "proxy_get_header_map_value"
    (func $get (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "x-negative")
  (global $bump (mut i32) (i32.const 1024))
  (func (export "malloc") (param $n i32) (result i32)
    (global.get $bump)
    (global.set $bump (i32.add (global.get $bump) (local.get $n))))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (if (result i32)
      (i32.eqz (call $get (i32.const 0) (i32.const 16) (i32.const 10) (i32.const 64) (i32.const 68)))
      (then (i32.const -1))
      (else (i32.const 7)))))
