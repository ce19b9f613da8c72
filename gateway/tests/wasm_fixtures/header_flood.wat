;; Tries to keep 30,000 distinct headers, past http::HeaderMap's own
;; maximum, as the request's x-flood header asks: "add" one at a time,
;; "pairs" in one proxy_set_header_map_pairs, "local" in a local response;
;; or "big": 900 headers each given the same 64 KiB of its memory (59 MB
;; copied out of 64 KiB). Without x-flood it lets the request through.
(module
  (import "env" "proxy_get_header_map_value"
    (func $get (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_add_header_map_value"
    (func $add (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_set_header_map_pairs"
    (func $pairs (param i32 i32 i32) (result i32)))
  (import "env" "proxy_send_local_response"
    (func $local (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  ;; Page 0: scratch; pages 1-8: the serialised map (30,000 pairs).
  (memory (export "memory") 9)
  (data (i32.const 16) "x-flood")
  (global $bump (mut i32) (i32.const 1024))
  (func (export "malloc") (param $n i32) (result i32)
    (global.get $bump)
    (global.set $bump (i32.add (global.get $bump) (local.get $n))))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_context_create") (param i32 i32))
  ;; Writes the i-th distinct name "x-" + four letters at 500.
  (func $name (param $i i32)
    (i32.store16 (i32.const 500) (i32.const 0x2d78))
    (i32.store8 (i32.const 502) (i32.add (i32.const 97) (i32.rem_u (local.get $i) (i32.const 26))))
    (i32.store8 (i32.const 503) (i32.add (i32.const 97) (i32.rem_u (i32.div_u (local.get $i) (i32.const 26)) (i32.const 26))))
    (i32.store8 (i32.const 504) (i32.add (i32.const 97) (i32.rem_u (i32.div_u (local.get $i) (i32.const 676)) (i32.const 26))))
    (i32.store8 (i32.const 505) (i32.add (i32.const 97) (i32.rem_u (i32.div_u (local.get $i) (i32.const 17576)) (i32.const 26)))))
  ;; The map of 30,000 pairs "x-abcd: v" at 65536; returns its length.
  (func $map (result i32)
    (local $i i32) (local $sizes i32) (local $text i32)
    (i32.store (i32.const 65536) (i32.const 30000))
    (local.set $sizes (i32.const 65540))
    (local.set $text (i32.const 305540))
    (block $done (loop $each
      (br_if $done (i32.ge_u (local.get $i) (i32.const 30000)))
      (call $name (local.get $i))
      (i32.store (local.get $sizes) (i32.const 6))
      (i32.store (i32.add (local.get $sizes) (i32.const 4)) (i32.const 1))
      (memory.copy (local.get $text) (i32.const 500) (i32.const 6))
      (i32.store (i32.add (local.get $text) (i32.const 6)) (i32.const 0x00007600))
      (local.set $sizes (i32.add (local.get $sizes) (i32.const 8)))
      (local.set $text (i32.add (local.get $text) (i32.const 9)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $each)))
    (i32.sub (local.get $text) (i32.const 65536)))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (local $i i32) (local $mode i32)
    (if (call $get (i32.const 0) (i32.const 16) (i32.const 7) (i32.const 64) (i32.const 68))
      (then (return (i32.const 0))))
    (local.set $mode (i32.load8_u (i32.load (i32.const 64))))
    ;; "add"
    (if (i32.eq (local.get $mode) (i32.const 97)) (then
      (block $done (loop $each
        (br_if $done (i32.ge_u (local.get $i) (i32.const 30000)))
        (call $name (local.get $i))
        (drop (call $add (i32.const 0) (i32.const 500) (i32.const 6) (i32.const 500) (i32.const 1)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $each)))))
    ;; "big"
    (if (i32.eq (local.get $mode) (i32.const 98)) (then
      (memory.fill (i32.const 65536) (i32.const 0x76) (i32.const 65536))
      (block $done (loop $each
        (br_if $done (i32.ge_u (local.get $i) (i32.const 900)))
        (call $name (local.get $i))
        (drop (call $add (i32.const 0) (i32.const 500) (i32.const 6) (i32.const 65536) (i32.const 65536)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $each)))))
    ;; "pairs"
    (if (i32.eq (local.get $mode) (i32.const 112)) (then
      (drop (call $pairs (i32.const 0) (i32.const 65536) (call $map)))))
    ;; "local"
    (if (i32.eq (local.get $mode) (i32.const 108)) (then
      (drop (call $local (i32.const 200) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)
        (i32.const 65536) (call $map) (i32.const 0)))))
    (i32.const 0)))
