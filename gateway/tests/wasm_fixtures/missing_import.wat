;; Imports a host function no proxy-wasm host has.
(module
  (import "env" "proxy_teleport" (func (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "malloc") (param i32) (result i32) (i32.const 1024))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_context_create") (param i32 i32)))
