;; Records every per-request call the host makes, with its arguments, as
;; one `x-calls` request header value each ("create 2 1", "headers 2 5 1",
;; "body 2 3 1", "done 2", "delete 2"), so a test can check the calls,
;; their order and their arguments. With `x-respond` the headers phase
;; sends a local 403 (no body call may follow); with `x-set-body` it sets
;; the body to "abc" (the body call must then see 3 bytes).
(module
  (import "env" "proxy_get_header_map_value"
    (func $get (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_add_header_map_value"
    (func $add (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_set_buffer_bytes"
    (func $set_body (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_send_local_response"
    (func $respond (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 100) "x-calls")
  (data (i32.const 110) "x-respond")
  (data (i32.const 120) "x-set-body")
  (data (i32.const 140) "abc")
  (data (i32.const 150) "create")
  (data (i32.const 160) "headers")
  (data (i32.const 170) "body")
  (data (i32.const 180) "done")
  (data (i32.const 190) "delete")
  (global $bump (mut i32) (i32.const 4096))
  (func (export "malloc") (param $n i32) (result i32)
    (global.get $bump)
    (global.set $bump (i32.add (global.get $bump) (local.get $n))))
  (func (export "proxy_abi_version_0_2_1"))

  ;; Writes `n` in decimal at `at`; returns the end.
  (func $itoa (param $n i32) (param $at i32) (result i32)
    (local $len i32) (local $t i32) (local $i i32)
    (local.set $t (local.get $n))
    (local.set $len (i32.const 1))
    (block $done
      (loop $count
        (br_if $done (i32.lt_u (local.get $t) (i32.const 10)))
        (local.set $t (i32.div_u (local.get $t) (i32.const 10)))
        (local.set $len (i32.add (local.get $len) (i32.const 1)))
        (br $count)))
    (local.set $i (i32.add (local.get $at) (local.get $len)))
    (local.set $t (local.get $n))
    (loop $digit
      (local.set $i (i32.sub (local.get $i) (i32.const 1)))
      (i32.store8 (local.get $i)
        (i32.add (i32.const 48) (i32.rem_u (local.get $t) (i32.const 10))))
      (local.set $t (i32.div_u (local.get $t) (i32.const 10)))
      (br_if $digit (local.get $t)))
    (i32.add (local.get $at) (local.get $len)))

  ;; Appends " n" at `p`; returns the end.
  (func $arg (param $p i32) (param $n i32) (result i32)
    (i32.store8 (local.get $p) (i32.const 32))
    (call $itoa (local.get $n) (i32.add (local.get $p) (i32.const 1))))

  ;; Adds `x-calls: <name> <args...>` (the first `nargs` of a, b, c).
  (func $rec (param $name i32) (param $nlen i32) (param $nargs i32)
             (param $a i32) (param $b i32) (param $c i32)
    (local $p i32)
    (memory.copy (i32.const 512) (local.get $name) (local.get $nlen))
    (local.set $p (i32.add (i32.const 512) (local.get $nlen)))
    (if (i32.ge_u (local.get $nargs) (i32.const 1))
      (then (local.set $p (call $arg (local.get $p) (local.get $a)))))
    (if (i32.ge_u (local.get $nargs) (i32.const 2))
      (then (local.set $p (call $arg (local.get $p) (local.get $b)))))
    (if (i32.ge_u (local.get $nargs) (i32.const 3))
      (then (local.set $p (call $arg (local.get $p) (local.get $c)))))
    (drop (call $add (i32.const 0) (i32.const 100) (i32.const 7)
                     (i32.const 512) (i32.sub (local.get $p) (i32.const 512)))))

  (func $has (param $k i32) (param $kl i32) (result i32)
    (i32.eqz (call $get (i32.const 0) (local.get $k) (local.get $kl)
                        (i32.const 64) (i32.const 68))))

  (func (export "proxy_on_context_create") (param $id i32) (param $root i32)
    ;; The root context (made at start, outside any request) is not recorded.
    (if (local.get $root)
      (then (call $rec (i32.const 150) (i32.const 6) (i32.const 2)
                       (local.get $id) (local.get $root) (i32.const 0)))))
  (func (export "proxy_on_request_headers") (param $id i32) (param $n i32) (param $eos i32)
      (result i32)
    (call $rec (i32.const 160) (i32.const 7) (i32.const 3)
               (local.get $id) (local.get $n) (local.get $eos))
    (if (call $has (i32.const 110) (i32.const 9))
      (then (drop (call $respond (i32.const 403) (i32.const 0) (i32.const 0) (i32.const 0)
                                 (i32.const 0) (i32.const 0) (i32.const 0) (i32.const -1)))))
    (if (call $has (i32.const 120) (i32.const 10))
      (then (drop (call $set_body (i32.const 0) (i32.const 0) (i32.const 0)
                                  (i32.const 140) (i32.const 3)))))
    (i32.const 0))
  (func (export "proxy_on_request_body") (param $id i32) (param $len i32) (param $eos i32)
      (result i32)
    (call $rec (i32.const 170) (i32.const 4) (i32.const 3)
               (local.get $id) (local.get $len) (local.get $eos))
    (i32.const 0))
  (func (export "proxy_on_done") (param $id i32) (result i32)
    (call $rec (i32.const 180) (i32.const 4) (i32.const 1)
               (local.get $id) (i32.const 0) (i32.const 0))
    (i32.const 1))
  (func (export "proxy_on_delete") (param $id i32)
    (call $rec (i32.const 190) (i32.const 6) (i32.const 1)
               (local.get $id) (i32.const 0) (i32.const 0))))
