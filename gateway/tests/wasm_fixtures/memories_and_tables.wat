;; Grows past an 8 MiB budget in pieces no single limit would see, as the
;; request's x-grow header asks: "memories" grows each of its four memories
;; by 3 MiB; "table" grows a table by 20 million elements (160 MB of
;; pointers). Without x-grow it lets the request through.
(module
  (import "env" "proxy_get_header_map_value"
    (func $get (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (memory $m1 0)
  (memory $m2 0)
  (memory $m3 0)
  (table $t 0 funcref)
  (data (i32.const 16) "x-grow")
  (global $bump (mut i32) (i32.const 1024))
  (func (export "malloc") (param $n i32) (result i32)
    (global.get $bump)
    (global.set $bump (i32.add (global.get $bump) (local.get $n))))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (local $mode i32)
    (if (call $get (i32.const 0) (i32.const 16) (i32.const 6) (i32.const 64) (i32.const 68))
      (then (return (i32.const 0))))
    (local.set $mode (i32.load8_u (i32.load (i32.const 64))))
    (if (i32.eq (local.get $mode) (i32.const 109)) (then
      (drop (memory.grow 0 (i32.const 48)))
      (drop (memory.grow $m1 (i32.const 48)))
      (drop (memory.grow $m2 (i32.const 48)))
      (drop (memory.grow $m3 (i32.const 48)))))
    (if (i32.eq (local.get $mode) (i32.const 116)) (then
      (drop (table.grow $t (ref.null func) (i32.const 20000000)))))
    (i32.const 0)))
