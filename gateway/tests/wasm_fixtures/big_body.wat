;; Bodies of the size the request's x-size header asks for (decimal
;; bytes), handed to the host as x-call says: "set" replaces the request
;; body (proxy_set_buffer_bytes on buffer 0, the whole of it), "local"
;; answers with it (proxy_send_local_response). The status each call
;; returns is ignored, as a careless module would: the host must fail the
;; request all the same (wasm_bodies.rs). Without x-call the request passes
;; unchanged.
(module
  (import "env" "proxy_get_header_map_value"
    (func $get (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_set_buffer_bytes"
    (func $set_body (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_send_local_response"
    (func $respond (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  ;; Page 0: names, and the values the host hands back (from 1024). From
  ;; 65536: the body; 32 MiB + 1 byte fits in the 513 pages after it.
  (memory (export "memory") 514)
  (data (i32.const 16) "x-size")
  (data (i32.const 32) "x-call")
  (global $bump (mut i32) (i32.const 1024))
  (func (export "malloc") (param $n i32) (result i32)
    (global.get $bump)
    (global.set $bump (i32.add (global.get $bump) (local.get $n))))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_context_create") (param i32 i32))
  ;; Whether header `key` is there; its value's address is then at 64, its
  ;; length at 68.
  (func $header (param $key i32) (param $len i32) (result i32)
    (i32.eqz (call $get (i32.const 0) (local.get $key) (local.get $len)
                        (i32.const 64) (i32.const 68))))
  ;; x-size as a number; 0 when absent.
  (func $size (result i32)
    (local $p i32) (local $end i32) (local $n i32)
    (if (i32.eqz (call $header (i32.const 16) (i32.const 6)))
      (then (return (i32.const 0))))
    (local.set $p (i32.load (i32.const 64)))
    (local.set $end (i32.add (local.get $p) (i32.load (i32.const 68))))
    (block $done (loop $digit
      (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
      (local.set $n (i32.add (i32.mul (local.get $n) (i32.const 10))
                             (i32.sub (i32.load8_u (local.get $p)) (i32.const 48))))
      (local.set $p (i32.add (local.get $p) (i32.const 1)))
      (br $digit)))
    (local.get $n))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (local $call i32) (local $n i32)
    ;; What the host handed back last request is not needed any more.
    (global.set $bump (i32.const 1024))
    (if (i32.eqz (call $header (i32.const 32) (i32.const 6)))
      (then (return (i32.const 0))))
    (local.set $call (i32.load8_u (i32.load (i32.const 64))))
    (local.set $n (call $size))
    (memory.fill (i32.const 65536) (i32.const 119) (local.get $n))
    ;; "set": replaces the whole body (start 0, size all of it).
    (if (i32.eq (local.get $call) (i32.const 115))
      (then (drop (call $set_body (i32.const 0) (i32.const 0) (i32.const -1)
                                  (i32.const 65536) (local.get $n)))))
    ;; "local": answers 200 with the body, no headers.
    (if (i32.eq (local.get $call) (i32.const 108))
      (then (drop (call $respond (i32.const 200) (i32.const 0) (i32.const 0)
                                 (i32.const 65536) (local.get $n)
                                 (i32.const 0) (i32.const 0) (i32.const -1)))))
    (i32.const 0)))
